import type { RawObject } from './source.js';
import type { WatchSpec } from './watch-types.js';

/**
 * The resources probes watch and the few fields kept of each (memory stays bounded at thousands of nodes and
 * 100k+ pods). Every probe asks for the same spec of a resource, so they share one watch.
 */

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface SlimTaint {
  key: string;
  value?: string;
  effect: string;
  timeAdded?: number;
}

export interface SlimNode {
  name: string;
  labels: Record<string, string>;
  created?: number;
  taints: SlimTaint[];
  /** The Ready condition; absent when the kubelet never posted one. */
  ready?: { status: ConditionStatus; heartbeat?: number; transition?: number; reason?: string };
}

export interface SlimLease {
  namespace: string;
  name: string;
  holder?: string;
  renewTime?: number;
  acquireTime?: number;
  durationSeconds?: number;
  transitions?: number;
}

export interface SlimToleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  seconds?: number;
}

export interface SlimPod {
  namespace: string;
  name: string;
  uid: string;
  nodeName?: string;
  labels: Record<string, string>;
  deletionTimestamp?: number;
  deletionGraceSeconds?: number;
  tolerations: SlimToleration[];
  phase?: string;
  ready: boolean;
  /** Status reason (e.g. `Evicted` by the kubelet). */
  reason?: string;
  /** The DisruptionTarget condition's reason (Kubernetes ≥ 1.26): DeletionByTaintManager, EvictionByEvictionAPI… */
  disruption?: string;
}

export interface SlimService {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  selector?: Record<string, string>;
}

export interface SlimEndpoints {
  namespace: string;
  name: string;
  /** For Endpoints, the name is the Service's; for EndpointSlices, the `kubernetes.io/service-name` label. */
  service: string;
  ready: number;
  notReady: number;
}

type Obj = Record<string, unknown>;
export const obj = (v: unknown): Obj => (v && typeof v === 'object' ? (v as Obj) : {});
export const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(obj) : []);
export const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
export const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const strMap = (v: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(obj(v)).filter((e): e is [string, string] => typeof e[1] === 'string'));

/** Milliseconds of a Kubernetes timestamp (RFC 3339, seconds or microseconds). */
export function time(v: unknown): number | undefined {
  if (typeof v !== 'string' || !v) return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

const meta = (o: RawObject) => obj(o.metadata);

function slimNode(o: RawObject): SlimNode {
  const m = meta(o);
  const spec = obj(o.spec);
  const ready = arr(obj(o.status).conditions).find((c) => c.type === 'Ready');
  const status = str(ready?.status);
  return {
    name: str(m.name) ?? '',
    labels: strMap(m.labels),
    created: time(m.creationTimestamp),
    taints: arr(spec.taints).map((t) => ({
      key: str(t.key) ?? '',
      value: str(t.value),
      effect: str(t.effect) ?? '',
      timeAdded: time(t.timeAdded),
    })),
    ready: ready
      ? {
          status: status === 'True' || status === 'False' ? status : 'Unknown',
          heartbeat: time(ready.lastHeartbeatTime),
          transition: time(ready.lastTransitionTime),
          reason: str(ready.reason),
        }
      : undefined,
  };
}

function slimLease(o: RawObject): SlimLease {
  const m = meta(o);
  const s = obj(o.spec);
  return {
    namespace: str(m.namespace) ?? '',
    name: str(m.name) ?? '',
    holder: str(s.holderIdentity),
    renewTime: time(s.renewTime),
    acquireTime: time(s.acquireTime),
    durationSeconds: num(s.leaseDurationSeconds),
    transitions: num(s.leaseTransitions),
  };
}

/**
 * Pods of one workload carry equal tolerations and labels: one shared copy of each instead of one per pod keeps
 * the pod store small at 100k+ pods. Bounded: past `max` distinct values, new ones are kept as they are.
 */
function interner<T>(max: number): (v: T) => T {
  const seen = new Map<string, T>();
  return (v) => {
    const key = JSON.stringify(v);
    const had = seen.get(key);
    if (had !== undefined) return had;
    if (seen.size < max) seen.set(key, Object.freeze(v));
    return v;
  };
}
const sharedTolerations = interner<SlimToleration[]>(10_000);
const sharedLabels = interner<Record<string, string>>(50_000);

function slimPod(o: RawObject): SlimPod {
  const m = meta(o);
  const spec = obj(o.spec);
  const status = obj(o.status);
  const conditions = arr(status.conditions);
  const disruption = conditions.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  return {
    namespace: str(m.namespace) ?? '',
    name: str(m.name) ?? '',
    uid: str(m.uid) ?? '',
    nodeName: str(spec.nodeName),
    labels: sharedLabels(strMap(m.labels)),
    deletionTimestamp: time(m.deletionTimestamp),
    deletionGraceSeconds: num(m.deletionGracePeriodSeconds),
    tolerations: sharedTolerations(
      arr(spec.tolerations).map((t) => ({
        key: str(t.key),
        operator: str(t.operator),
        value: str(t.value),
        effect: str(t.effect),
        seconds: num(t.tolerationSeconds),
      })),
    ),
    phase: str(status.phase),
    ready: conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
    reason: str(status.reason),
    disruption: disruption ? (str(disruption.reason) ?? 'DisruptionTarget') : undefined,
  };
}

function slimService(o: RawObject): SlimService {
  const m = meta(o);
  const selector = strMap(obj(o.spec).selector);
  return {
    namespace: str(m.namespace) ?? '',
    name: str(m.name) ?? '',
    labels: strMap(m.labels),
    selector: Object.keys(selector).length ? selector : undefined,
  };
}

function slimEndpoints(o: RawObject): SlimEndpoints {
  const m = meta(o);
  let ready = 0;
  let notReady = 0;
  for (const s of arr(o.subsets)) {
    ready += arr(s.addresses).length;
    notReady += arr(s.notReadyAddresses).length;
  }
  return { namespace: str(m.namespace) ?? '', name: str(m.name) ?? '', service: str(m.name) ?? '', ready, notReady };
}

function slimEndpointSlice(o: RawObject): SlimEndpoints {
  const m = meta(o);
  let ready = 0;
  let notReady = 0;
  for (const e of arr(o.endpoints)) {
    if (obj(e.conditions).ready === false) notReady++;
    else ready++;
  }
  return {
    namespace: str(m.namespace) ?? '',
    name: str(m.name) ?? '',
    service: strMap(m.labels)['kubernetes.io/service-name'] ?? '',
    ready,
    notReady,
  };
}

export const NODE_LEASE_NAMESPACE = 'kube-node-lease';

export const paths = {
  nodes: '/api/v1/nodes',
  pods: '/api/v1/pods',
  services: '/api/v1/services',
  endpoints: '/api/v1/endpoints',
  nodeLeases: `/apis/coordination.k8s.io/v1/namespaces/${NODE_LEASE_NAMESPACE}/leases`,
  leases: (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
  endpointSlices: (version: 'v1' | 'v1beta1') => `/apis/discovery.k8s.io/${version}/endpointslices`,
};

export const watchSpecs = {
  nodes: (): WatchSpec<SlimNode> => ({ key: 'nodes', path: paths.nodes, slim: slimNode }),
  nodeLeases: (): WatchSpec<SlimLease> => ({ key: 'leases/kube-node-lease', path: paths.nodeLeases, slim: slimLease }),
  /** Every pod of the cluster (pods not yet bound are kept too: they are few and cheap). */
  pods: (): WatchSpec<SlimPod> => ({ key: 'pods', path: paths.pods, slim: slimPod }),
  services: (): WatchSpec<SlimService> => ({ key: 'services', path: paths.services, slim: slimService }),
  endpoints: (): WatchSpec<SlimEndpoints> => ({ key: 'endpoints', path: paths.endpoints, slim: slimEndpoints }),
  endpointSlices: (version: 'v1' | 'v1beta1'): WatchSpec<SlimEndpoints> => ({
    key: `endpointslices/${version}`,
    path: paths.endpointSlices(version),
    slim: slimEndpointSlice,
  }),
  lease: (namespace: string, name: string): WatchSpec<SlimLease> => ({
    key: `lease/${namespace}/${name}`,
    path: paths.leases(namespace),
    fieldSelector: `metadata.name=${name}`,
    slim: slimLease,
  }),
};

/** The zone key the node lifecycle controller groups nodes by: region and zone labels (new or beta names). */
export function zoneOf(labels: Record<string, string>): string {
  const region = labels['topology.kubernetes.io/region'] ?? labels['failure-domain.beta.kubernetes.io/region'] ?? '';
  const zone = labels['topology.kubernetes.io/zone'] ?? labels['failure-domain.beta.kubernetes.io/zone'] ?? '';
  return region && zone ? `${region}:${zone}` : region || zone;
}
