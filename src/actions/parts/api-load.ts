import type { Clock } from '../../core/clock.js';
import { messageOf } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { KubeAccess } from '../../kube/types.js';

/** The namespace load-apiserver owns: the only place its requests write, to objects it created there. */
export const LOAD_NAMESPACE = 'kr-load';

/** Where a resource lives in the API: its base path, and whether it is namespaced. */
interface ResourceInfo {
  base: string;
  namespaced: boolean;
  /** A subresource (status): read by name only. */
  sub?: string;
}

/** The resources a load may request. */
export const LOAD_RESOURCES = {
  configmaps: { base: '/api/v1', namespaced: true },
  endpoints: { base: '/api/v1', namespaced: true },
  endpointslices: { base: '/apis/discovery.k8s.io/v1', namespaced: true },
  events: { base: '/api/v1', namespaced: true },
  leases: { base: '/apis/coordination.k8s.io/v1', namespaced: true },
  namespaces: { base: '/api/v1', namespaced: false },
  nodes: { base: '/api/v1', namespaced: false },
  'nodes/status': { base: '/api/v1', namespaced: false, sub: 'status' },
  pods: { base: '/api/v1', namespaced: true },
  'pods/status': { base: '/api/v1', namespaced: true, sub: 'status' },
  services: { base: '/api/v1', namespaced: true },
} as const satisfies Record<string, ResourceInfo>;
export type LoadResource = keyof typeof LOAD_RESOURCES;

/** The resources it writes: only its own objects of these, in LOAD_NAMESPACE. */
export const WRITABLE = ['configmaps', 'leases'] as const satisfies readonly LoadResource[];
export type Writable = (typeof WRITABLE)[number];
export const isWritable = (r: string): r is Writable => (WRITABLE as readonly string[]).includes(r);

export const WRITE_VERBS = ['create', 'update', 'patch'] as const;
export type LoadVerb = 'get' | 'list' | (typeof WRITE_VERBS)[number];

/** One kind of request of the load, as the runbook gives it (checked by the action's schema), kept in the revert state. */
export type LoadRequest = {
  verb: LoadVerb;
  resource: LoadResource;
  namespace: string | null;
  name: string | null;
  weight: number;
};

/** The objects the load writes, by resource, all in LOAD_NAMESPACE. */
export type OwnObjects = { [R in Writable]?: string };

/** The collection path of a resource: in a namespace, or across all of them (cluster-scoped ones have none). */
export function collectionPath(resource: LoadResource, namespace: string | null | undefined): string {
  const r = LOAD_RESOURCES[resource] as ResourceInfo;
  const plural = resource.split('/')[0]!;
  return `${r.base}${r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ''}/${plural}`;
}

/** An object's path (with its subresource, if the resource is one). */
export function objectPath(resource: LoadResource, namespace: string | null | undefined, name: string): string {
  const r = LOAD_RESOURCES[resource] as ResourceInfo;
  return `${collectionPath(resource, namespace)}/${encodeURIComponent(name)}${r.sub ? `/${r.sub}` : ''}`;
}

/** The object load-apiserver writes for a resource, as created and as an update sends it. */
export function ownObject(resource: Writable, name: string, runId: string, now: number): Record<string, unknown> {
  const metadata = {
    name,
    namespace: LOAD_NAMESPACE,
    labels: { 'app.kubernetes.io/managed-by': 'kube-runbook', 'kube-runbook/run': labelValue(runId) },
  };
  if (resource === 'configmaps') return { apiVersion: 'v1', kind: 'ConfigMap', metadata, data: { at: String(now) } };
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata,
    spec: { holderIdentity: 'kube-runbook-load', leaseDurationSeconds: 40, renewTime: microTime(now) },
  };
}

/** A label value: at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric. */
function labelValue(s: string): string {
  return s
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
}

/** A Lease's MicroTime: RFC 3339 with microseconds. */
const microTime = (ms: number) => new Date(ms).toISOString().replace(/Z$/, '000Z');

export interface HttpCall {
  path: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH';
  query?: Record<string, string | number>;
  body?: unknown;
  contentType?: string;
}

/** The HTTP call one request of the load makes. Writes reach only `own` (the action's objects) or are dry runs. */
export function callFor(r: LoadRequest, own: OwnObjects, runId: string, now: number): HttpCall {
  if (r.verb === 'list') return { path: collectionPath(r.resource, r.namespace), method: 'GET', query: { limit: 500 } };
  if (r.verb === 'get') {
    const name = r.name ?? own[r.resource as Writable]!;
    return { path: objectPath(r.resource, r.name ? r.namespace : LOAD_NAMESPACE, name), method: 'GET' };
  }
  const resource = r.resource as Writable;
  const name = own[resource]!;
  if (r.verb === 'create')
    // a dry run goes through authentication, priority and fairness, admission and validation, and stores nothing
    return {
      path: collectionPath(resource, LOAD_NAMESPACE),
      method: 'POST',
      query: { dryRun: 'All' },
      body: ownObject(resource, `${name}-create`, runId, now),
    };
  if (r.verb === 'update')
    return { path: objectPath(resource, LOAD_NAMESPACE, name), method: 'PUT', body: ownObject(resource, name, runId, now) };
  const patch = resource === 'configmaps' ? { data: { at: String(now) } } : { spec: { renewTime: microTime(now) } };
  return { path: objectPath(resource, LOAD_NAMESPACE, name), method: 'PATCH', body: patch, contentType: 'application/merge-patch+json' };
}

/**
 * Paces requests to `qps` on the injected clock: each `take` reserves the next start time, 1/qps after the one
 * before, and sleeps until it (a token bucket holding one token). Written here rather than taken from a rate
 * limiter package, because those sleep on the real timers and the pacing must run on ctx.clock to be tested.
 */
class Pacer {
  private next: number;
  private readonly gapMs: number;

  constructor(
    private readonly clock: Clock,
    qps: number,
  ) {
    this.gapMs = 1000 / qps;
    this.next = clock.now();
  }

  async take(signal: AbortSignal): Promise<void> {
    const now = this.clock.now();
    // a start time that passed unused (every worker busy) is not made up for later: no burst above qps
    const at = Math.max(this.next, now);
    this.next = at + this.gapMs;
    if (at > now) await this.clock.sleep(at - now, signal);
  }
}

/** Picks the requests in proportion to their weights, spread evenly (smooth weighted round robin, as nginx does). */
export function weightedRoundRobin<T extends { weight: number }>(items: readonly T[]): () => T {
  const current = items.map(() => 0);
  const total = items.reduce((n, i) => n + i.weight, 0);
  return () => {
    let best = 0;
    for (let i = 0; i < items.length; i++) {
      current[i]! += items[i]!.weight;
      if (current[i]! > current[best]!) best = i;
    }
    current[best]! -= total;
    return items[best]!;
  };
}

export interface LoadPlan {
  requests: LoadRequest[];
  qps: number;
  concurrency: number;
  headers: Record<string, string>;
  own: OwnObjects;
  runId: string;
}

/** What a load did, by answer: `2xx`, `429`, other statuses, and `error` (no answer). */
export type LoadCounts = Record<string, number>;

/** One request as the load sends it: its answer's status, or 0 when none came. */
export async function send(kube: KubeAccess, plan: LoadPlan, r: LoadRequest, clock: Clock, signal: AbortSignal): Promise<number> {
  const call = callFor(r, plan.own, plan.runId, clock.now());
  const a = await kube.request!(call.path, {
    method: call.method,
    query: call.query,
    body: call.body,
    contentType: call.contentType,
    headers: plan.headers,
    // only the status counts: a list of every pod, thousands of times a second, is not kept in the executor
    discardBody: true,
    timeoutMs: 10_000,
    signal,
  });
  return a.status;
}

/**
 * `concurrency` workers, each taking the next start time from the pacer and sending the next request: at most
 * `qps` requests start per second and at most `concurrency` are unanswered at once. Ends when `signal` aborts
 * (requests in flight are cancelled) and returns what it counted.
 */
export async function runLoad(kube: KubeAccess, plan: LoadPlan, clock: Clock, log: Logger, signal: AbortSignal): Promise<LoadCounts> {
  const pacer = new Pacer(clock, plan.qps);
  const next = weightedRoundRobin(plan.requests);
  const counts: LoadCounts = {};
  const count = (k: string) => (counts[k] = (counts[k] ?? 0) + 1);
  let lastError = '';
  const worker = async () => {
    while (!signal.aborted) {
      try {
        await pacer.take(signal);
      } catch {
        return;
      }
      const status = await send(kube, plan, next(), clock, signal).catch((e: unknown) => {
        if (!signal.aborted) lastError = messageOf(e);
        return 0;
      });
      if (signal.aborted) return;
      count(status >= 200 && status < 300 ? '2xx' : status === 0 ? 'error' : String(status));
    }
  };
  await Promise.all(Array.from({ length: plan.concurrency }, worker));
  if (lastError) log.warn(`load-apiserver: last request that got no answer: ${lastError}`);
  return counts;
}
