import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  Observable,
  PatchStrategy,
  Watch,
  type ConfigurationOptions,
  type KubeConfig,
  type ObservableMiddleware,
  type RequestContext,
} from '@kubernetes/client-node';
import type { RequestOptions } from 'node:https';
import { Agent } from 'undici';
import type { NodeLite, PodLite } from './types.js';

/** What a simulated kubelet calls (SimApi; a fake in tests). */
export type KubeletCalls = Pick<
  SimApi,
  'readLease' | 'createLease' | 'replaceLease' | 'readNode' | 'createNode' | 'patchNodeStatus' | 'patchPodStatus' | 'finalizePod'
>;

/**
 * The calls a kubelet makes, through client-node, each with a timeout (a cut-off apiserver must not leave
 * requests hanging). Objects are handed back as plain JSON, as watch events are.
 */
export class SimApi {
  readonly core: CoreV1Api;
  readonly coord: CoordinationV1Api;
  readonly watcher: Watch;

  private pool: Promise<Agent> | undefined;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  /**
   * `maxInFlight` bounds concurrent requests: a fleet of thousands of nodes must not open thousands of
   * connections at once (each timed-out request costs a new TLS handshake, and an overloaded apiserver melts).
   * A request's timeout starts when it is sent, not while it waits for a slot.
   */
  constructor(
    readonly kc: KubeConfig,
    readonly timeoutMs = 10_000,
    readonly maxInFlight = 64,
    /**
     * Reach the apiserver through this unix socket (a forwarder inside the node's network namespace) rather than
     * dialing it: TLS still checks the apiserver's name as the kubeconfig has it.
     */
    readonly socketPath?: string,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.coord = kc.makeApiClient(CoordinationV1Api);
    // watches go through the same pool (and so the same socket) as the other calls
    const watchKc = Object.create(kc) as KubeConfig;
    watchKc.applySecurityAuthentication = async (ctx) => {
      await kc.applySecurityAuthentication(ctx);
      ctx.setDispatcher(await this.dispatcher());
    };
    this.watcher = new Watch(watchKc);
  }

  async readLease(name: string): Promise<{ resourceVersion?: string } | undefined> {
    return orNotFound(async () =>
      plain(await this.limited(() => this.coord.readNamespacedLease({ name, namespace: 'kube-node-lease' }, this.opts()))),
    );
  }

  async createLease(body: object): Promise<{ metadata?: { resourceVersion?: string } }> {
    return plain(await this.limited(() => this.coord.createNamespacedLease({ namespace: 'kube-node-lease', body }, this.opts())));
  }

  async replaceLease(name: string, body: object): Promise<{ metadata?: { resourceVersion?: string } }> {
    return plain(await this.limited(() => this.coord.replaceNamespacedLease({ name, namespace: 'kube-node-lease', body }, this.opts())));
  }

  async readNode(name: string): Promise<(NodeLite & { metadata: { uid?: string } }) | undefined> {
    return orNotFound(async () => plain(await this.limited(() => this.core.readNode({ name }, this.opts()))));
  }

  async createNode(body: object): Promise<NodeLite> {
    return plain(await this.limited(() => this.core.createNode({ body }, this.opts())));
  }

  async patchNodeStatus(name: string, body: object): Promise<void> {
    await this.limited(() => this.core.patchNodeStatus({ name, body }, this.opts(PatchStrategy.MergePatch)));
  }

  async listPods(fieldSelector: string): Promise<{ items: PodLite[]; resourceVersion: string }> {
    const list = plain<{ items: PodLite[]; metadata?: { resourceVersion?: string } }>(
      await this.limited(() => this.core.listPodForAllNamespaces({ fieldSelector }, this.opts(undefined, this.timeoutMs * 3))),
    );
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  async listNodes(labelSelector: string): Promise<{ items: NodeLite[]; resourceVersion: string }> {
    const list = plain<{ items: NodeLite[]; metadata?: { resourceVersion?: string } }>(
      await this.limited(() => this.core.listNode({ labelSelector }, this.opts(undefined, this.timeoutMs * 3))),
    );
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  async patchPodStatus(namespace: string, name: string, body: object): Promise<void> {
    await this.limited(() => this.core.patchNamespacedPodStatus({ name, namespace, body }, this.opts(PatchStrategy.MergePatch)));
  }

  /** Deletes a pod at once (grace 0), only if it is still the same pod (uid precondition). Quiet when it is gone. */
  async finalizePod(namespace: string, name: string, uid: string): Promise<void> {
    try {
      await this.limited(() =>
        this.core.deleteNamespacedPod({ name, namespace, body: { gracePeriodSeconds: 0, preconditions: { uid } } }, this.opts()),
      );
    } catch (e) {
      if (statusOf(e) === 404 || statusOf(e) === 409) return;
      throw e;
    }
  }

  /** A token of the pod's ServiceAccount bound to the pod, as a kubelet asks for one to mount (the Node authorizer allows it for its own pods). */
  async podToken(namespace: string, serviceAccount: string, pod: { name: string; uid: string }): Promise<string> {
    const r = await this.limited(() =>
      this.core.createNamespacedServiceAccountToken(
        {
          name: serviceAccount,
          namespace,
          body: {
            spec: {
              audiences: [],
              expirationSeconds: 86_400,
              boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid },
            },
          },
        },
        this.opts(),
      ),
    );
    const token = r.status?.token;
    if (!token) throw new Error(`no token for ${namespace}/${serviceAccount}`);
    return token;
  }

  /** A key of a Secret a pod on this node names (the node authorizer lets its kubelet read no other), decoded. */
  async podSecretKey(namespace: string, name: string, key: string): Promise<string> {
    const secret = plain<{ data?: Record<string, string> }>(
      await this.limited(() => this.core.readNamespacedSecret({ name, namespace }, this.opts())),
    );
    const value = secret.data?.[key];
    if (value === undefined) throw new Error(`secret ${namespace}/${name} has no key ${key}`);
    return Buffer.from(value, 'base64').toString('utf8');
  }

  /** Runs `fn` once fewer than `maxInFlight` requests are under way. */
  async limited<T>(fn: () => Promise<T>): Promise<T> {
    if (this.inFlight >= this.maxInFlight) await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight++;
    try {
      return await fn();
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  /**
   * One keep-alive connection pool for every call. client-node 2.0 builds a new undici Agent, hence a new TLS
   * connection, for each request; a fleet renewing hundreds of leases a second spent its CPU (and the
   * apiserver's) on handshakes.
   */
  private dispatcher(): Promise<Agent> {
    this.pool ??= (async () => {
      const o: RequestOptions = {};
      await this.kc.applyToHTTPSOptions(o);
      return new Agent({
        connect: {
          ca: o.ca,
          cert: o.cert,
          key: o.key,
          rejectUnauthorized: o.rejectUnauthorized,
          servername: o.servername,
          ...(this.socketPath ? { socketPath: this.socketPath } : {}),
        },
        connections: this.maxInFlight,
        keepAliveTimeout: 30_000,
      });
    })();
    return this.pool;
  }

  /** Closes the connection pool. */
  async close(): Promise<void> {
    if (this.pool) await (await this.pool).close();
  }

  /**
   * Drops every connection, idle or in use (a watch's too), so that the next call dials afresh: what a kubelet on
   * HTTP/1.1 does when its heartbeat fails again (cmd/kubelet's closeAllConns; on HTTP/2 it closes the idle ones and
   * pings the rest). Calls in flight on the old connections fail; the callers retry.
   */
  closeConnections(): void {
    const old = this.pool;
    this.pool = undefined;
    void old?.then((pool) => pool.destroy()).catch(() => {});
  }

  /** Per-call options: a timeout (and a patch content type), and the shared connection pool. */
  opts(contentType?: string, timeoutMs = this.timeoutMs): ConfigurationOptions {
    const m: ObservableMiddleware = {
      pre: (ctx: RequestContext) =>
        new Observable(
          this.dispatcher().then((pool) => {
            ctx.setDispatcher(pool);
            ctx.setSignal(AbortSignal.timeout(timeoutMs));
            if (contentType) ctx.setHeaderParam('Content-Type', contentType);
            return ctx;
          }),
        ),
      post: (r) => new Observable(Promise.resolve(r)),
    };
    return { middleware: [m], middlewareMergeStrategy: 'append' };
  }
}

/** The HTTP status of a failed call, if it got that far. */
export function statusOf(e: unknown): number | undefined {
  if (e instanceof ApiException) return e.code;
  const code = (e as { statusCode?: unknown; code?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

async function orNotFound<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (e) {
    if (statusOf(e) === 404) return undefined;
    throw e;
  }
}

/** The object as JSON has it (dates as strings), whatever client-node deserialised it into. */
function plain<T>(o: unknown): T {
  return JSON.parse(JSON.stringify(o)) as T;
}
