import type { RawObject } from './source.js';
import type { WatchSpec } from './watch-types.js';

/**
 * Watches of resources a runbook names (any kind, and the workloads whose availability it states). Kept apart
 * from resources.ts, whose watches the node-lifecycle probes share.
 */

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const strMap = (v: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(obj(v)).filter((e): e is [string, string] => typeof e[1] === 'string'));

/** An object as the apiserver sends it, less its managedFields (large, and nothing a condition reads). */
export interface KubeObject {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  raw: RawObject;
}

function slimObject(o: RawObject): KubeObject {
  const m = obj(o.metadata);
  const { managedFields: _dropped, ...metadata } = m;
  return {
    namespace: typeof m.namespace === 'string' ? m.namespace : '',
    name: typeof m.name === 'string' ? m.name : '',
    labels: strMap(m.labels),
    raw: { ...o, metadata },
  };
}

/** Objects of one collection path, selected by the apiserver; probes with the same selection share the watch. */
export function objectsSpec(path: string, labelSelector?: string, fieldSelector?: string): WatchSpec<KubeObject> {
  const key = `objects:${path}?labels=${labelSelector ?? ''}&fields=${fieldSelector ?? ''}`;
  return { key, path, labelSelector, fieldSelector, slim: slimObject };
}

export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet';

/** What availability needs of a Deployment, StatefulSet or DaemonSet. */
export interface SlimWorkload {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** Replicas wanted (spec.replicas, default 1; for a DaemonSet status.desiredNumberScheduled). */
  desired: number;
  /** Ready replicas (status.readyReplicas; for a DaemonSet status.numberReady). Absent fields are 0. */
  ready: number;
}

const PLURAL: Record<WorkloadKind, string> = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' };

function slimWorkload(kind: WorkloadKind) {
  return (o: RawObject): SlimWorkload => {
    const m = obj(o.metadata);
    const spec = obj(o.spec);
    const status = obj(o.status);
    const daemon = kind === 'DaemonSet';
    return {
      namespace: typeof m.namespace === 'string' ? m.namespace : '',
      name: typeof m.name === 'string' ? m.name : '',
      labels: strMap(m.labels),
      desired: (daemon ? num(status.desiredNumberScheduled) : num(spec.replicas)) ?? (daemon ? 0 : 1),
      ready: (daemon ? num(status.numberReady) : num(status.readyReplicas)) ?? 0,
    };
  };
}

/** The collection path of a workload kind (apps/v1), in one namespace or cluster-wide. */
const workloadPath = (kind: WorkloadKind, namespace?: string) =>
  namespace ? `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/${PLURAL[kind]}` : `/apis/apps/v1/${PLURAL[kind]}`;

export function workloadSpec(kind: WorkloadKind, namespace?: string, labelSelector?: string): WatchSpec<SlimWorkload> {
  const path = workloadPath(kind, namespace);
  return { key: `workloads:${path}?labels=${labelSelector ?? ''}`, path, labelSelector, slim: slimWorkload(kind) };
}
