import type { Clock } from '../core/clock.js';
import { type Logger, silentLogger } from '../core/logger.js';
import { FakeApiServer } from './fake-source.js';
import { paths } from '../kube/resources.js';
import { ApiStatusError } from '../kube/source.js';
import type { AccessCheck, KubeAccess, RawResponse } from '../kube/types.js';
import { WatchHub } from '../kube/watch.js';
import type { WatchOptions } from '../kube/watch-types.js';

export type RawHandler = (path: string) => RawResponse | Promise<RawResponse>;

export interface FakeKubeAccess extends KubeAccess {
  readonly server: string;
  readonly apiserver: FakeApiServer;
  readonly watches: WatchHub;
  /** Answers raw GETs (/readyz, /version…); 404 by default; throws while the fake apiserver is down. */
  rawHandler: RawHandler;
  rawCalls: string[];
  /** Leases outside kube-node-lease (the run lock), by namespace/name, with the apiserver's optimistic concurrency. */
  leases: Map<string, { metadata: { resourceVersion?: string } }>;
  /** RBAC answers: true denies the check (default: everything allowed). */
  deny: (check: AccessCheck) => boolean;
  close(): void;
}

/** A KubeAccess over an in-memory apiserver, for unit tests of probes, actions and the engine. */
export function fakeKubeAccess(clock: Clock, o: { log?: Logger; watch?: Partial<WatchOptions>; context?: string } = {}): FakeKubeAccess {
  const apiserver = new FakeApiServer(clock);
  const watches = new WatchHub(apiserver, clock, o.log ?? silentLogger, { random: () => 0.5, ...o.watch });
  const config = {
    contextName: o.context ?? 'fake',
    server: 'https://fake.invalid:6443',
    credentials: async () => ({ headers: {}, insecure: true }),
  };
  const access: FakeKubeAccess = {
    contextName: o.context ?? 'fake',
    server: 'https://fake.invalid:6443',
    config,
    apiserver,
    watches,
    rawCalls: [],
    leases: new Map(),
    rawHandler: (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.20.2"}' } : { status: 404, body: 'not found' }),
    async raw(path) {
      access.rawCalls.push(path);
      if (apiserver.mode !== 'up') throw new Error('connect ECONNREFUSED');
      return access.rawHandler(path);
    },
    async json<T>(path: string, opts?: { method?: string; body?: unknown }): Promise<T> {
      const lease = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/.exec(path);
      if (lease) {
        if (apiserver.mode !== 'up') throw new Error('connect ECONNREFUSED');
        return leaseStore(access.leases, lease[1]!, lease[2], opts?.method ?? 'GET', opts?.body) as T;
      }
      const r = await access.raw(path);
      if (r.status < 200 || r.status > 299) throw new ApiStatusError(r.status, r.body);
      return JSON.parse(r.body) as T;
    },
    async listNodes() {
      const ac = new AbortController();
      const page = await apiserver.list({ path: paths.nodes, limit: 0, signal: ac.signal });
      return page.items.map((n) => ({ name: n.metadata?.name ?? '', labels: (n.metadata?.labels ?? {}) as Record<string, string> }));
    },
    deny: () => false,
    canI: async (check) => !access.deny(check),
    close: () => watches.close(),
  };
  return access;
}

let leaseRv = 0;

/** GET, POST and PUT of Leases as the apiserver answers them: 404 when absent, 409 on a conflict or a stale resourceVersion. */
function leaseStore(store: FakeKubeAccess['leases'], ns: string, name: string | undefined, method: string, body: unknown): unknown {
  const obj = body as { metadata: { name: string; resourceVersion?: string } } | undefined;
  const key = `${ns}/${name ?? obj?.metadata.name}`;
  const stored = store.get(key);
  const save = () => {
    const copy = JSON.parse(JSON.stringify(obj)) as { metadata: { resourceVersion?: string } };
    copy.metadata.resourceVersion = String(++leaseRv);
    store.set(key, copy);
    return copy;
  };
  if (method === 'GET') {
    if (!stored) throw new ApiStatusError(404, `leases "${name}" not found`);
    return JSON.parse(JSON.stringify(stored));
  }
  if (method === 'POST') {
    if (stored) throw new ApiStatusError(409, `leases "${obj?.metadata.name}" already exists`);
    return save();
  }
  if (method === 'PUT') {
    if (!stored) throw new ApiStatusError(404, `leases "${name}" not found`);
    if (obj?.metadata.resourceVersion !== stored.metadata.resourceVersion) throw new ApiStatusError(409, 'the object has been modified');
    return save();
  }
  throw new ApiStatusError(405, `method ${method} not allowed`);
}
