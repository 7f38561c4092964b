import type { AgentApi, ConfigMapLite } from '../nodes/agent-protocol.js';
import { executorKey, type AgentKeys } from '../nodes/agent-auth.js';

/** An apiserver's answer other than 2xx, as src/kube/source.ts's ApiStatusError carries it. */
export class FakeStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface Obj {
  metadata: ConfigMapLite['metadata'];
  immutable?: boolean;
  [k: string]: unknown;
}

/**
 * The few apiserver paths the agent transport and `kube-runbook agent` use, in memory: ConfigMaps (create, get,
 * list by label (in pages, with `limit` and `continue`, in name order as etcd gives them), replace with a resourceVersion check, immutable ones refused, delete), Leases (get, put) and
 * SelfSubjectAccessReviews answered from `denied`. `down` makes every call fail as a cut-off node would see it.
 */
export class FakeAgentApi implements AgentApi {
  readonly objects = new Map<string, Obj>();
  readonly calls: string[] = [];
  /** `verb resource` pairs the SelfSubjectAccessReviews deny. */
  denied = new Set<string>();
  down = false;
  private rv = 1;
  private uid = 1;

  async json<T>(path: string, o: { method?: string; query?: Record<string, unknown>; body?: unknown } = {}): Promise<T> {
    await Promise.resolve();
    const method = o.method ?? 'GET';
    this.calls.push(`${method} ${path}`);
    if (this.down) throw Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' });
    if (path.endsWith('/selfsubjectaccessreviews')) {
      const a = (o.body as { spec: { resourceAttributes: { verb: string; resource: string } } }).spec.resourceAttributes;
      return { status: { allowed: !this.denied.has(`${a.verb} ${a.resource}`) } } as T;
    }
    const m = /^\/api(?:s\/[^/]+)?\/v1\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(path);
    if (!m) throw new FakeStatusError(404, `no route ${path}`);
    const [, ns, kind, name] = m;
    const key = (n: string) => `${kind}/${ns}/${n}`;
    if (!name && method === 'POST') {
      const body = structuredClone(o.body) as Obj;
      if (this.objects.has(key(body.metadata.name))) throw new FakeStatusError(409, `${body.metadata.name} already exists`);
      body.metadata = { ...body.metadata, namespace: ns, uid: `uid-${this.uid++}`, resourceVersion: String(this.rv++) };
      this.objects.set(key(body.metadata.name), body);
      return structuredClone(body) as T;
    }
    if (!name) {
      const selector = String(o.query?.labelSelector ?? '');
      const wants = selector ? selector.split(',').map((p) => p.split('=') as [string, string]) : [];
      const all = [...this.objects.entries()]
        .filter(([k, v]) => k.startsWith(`${kind}/${ns}/`) && wants.every(([l, val]) => v.metadata.labels?.[l] === val))
        .map(([, v]) => v)
        .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
      const after = o.query?.continue === undefined ? undefined : String(o.query.continue);
      const from = after === undefined ? all : all.filter((v) => v.metadata.name > after);
      const limit = Number(o.query?.limit ?? 0);
      const items = (limit > 0 ? from.slice(0, limit) : from).map((v) => structuredClone(v));
      const more = limit > 0 && from.length > limit;
      return { items, metadata: more ? { continue: items.at(-1)!.metadata.name } : {} } as T;
    }
    const current = this.objects.get(key(name));
    if (method === 'DELETE') {
      if (!current) throw new FakeStatusError(404, `${name} not found`);
      this.objects.delete(key(name));
      return {} as T;
    }
    if (!current) throw new FakeStatusError(404, `${name} not found`);
    if (method === 'PUT') {
      const body = structuredClone(o.body) as Obj;
      if (current.immutable) throw new FakeStatusError(422, `${name} is immutable`);
      if (body.metadata.resourceVersion && body.metadata.resourceVersion !== current.metadata.resourceVersion)
        throw new FakeStatusError(409, 'conflict');
      body.metadata = { ...body.metadata, uid: current.metadata.uid, resourceVersion: String(this.rv++) };
      this.objects.set(key(name), body);
      return structuredClone(body) as T;
    }
    return structuredClone(current) as T;
  }

  /** Puts an object as if someone created it. */
  put(kind: string, ns: string, obj: Obj): void {
    this.objects.set(`${kind}/${ns}/${obj.metadata.name}`, { ...obj, metadata: { ...obj.metadata, resourceVersion: String(this.rv++) } });
  }

  names(kind: string, ns: string): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(`${kind}/${ns}/`)).map((k) => k.split('/')[2]!);
  }
}

/** What an agent under test is told about itself: `node`'s, run by pod-`agent` (that node's key unless said), keyed by `keys`. */
export function agentIdentity(keys: AgentKeys, o: { node: string; namespace: string; runId: string; agent?: string; faultTtlMs: number }) {
  const agent = o.agent ?? o.node;
  return {
    node: o.node,
    namespace: o.namespace,
    runId: o.runId,
    agent: `pod-${agent}`,
    executorKey: executorKey(keys.publicKey)!,
    resultKey: keys.resultKey(agent),
    faultTtlMs: o.faultTtlMs,
  };
}
