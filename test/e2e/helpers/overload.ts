import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { realClock } from '../../../src/core/clock.js';
import { hierarchies } from '../../../src/lab/host/node-cgroup.js';
import { series } from '../../../src/kube/prometheus.js';
import type { KubeAccess } from '../../../src/kube/types.js';
import { until } from './lab.js';

/**
 * What examples/control-plane-overload*.yaml ask for before a run: the ServiceAccount the load runs as, its rights,
 * and a FlowSchema putting it in `workload-low`; and what a test reads of the load and of a cgroup's CPU quota.
 */
export interface LoadIdentity {
  namespace: string;
  name: string;
}

/** The examples' ServiceAccount; its FlowSchema has its name. */
const LOAD_SA: LoadIdentity = { namespace: 'default', name: 'liveness-load' };
export const LOAD_LEVEL = 'workload-low';

/**
 * Creates the load's identity as the examples' headers say (what exists already is kept): `sa`, its rights (list pods,
 * patch ConfigMaps in kr-load), a FlowSchema of its name; waits for the FlowSchema to be taken in.
 */
export async function createLoadIdentity(kube: KubeAccess, sa: LoadIdentity = LOAD_SA): Promise<void> {
  const post = (path: string, body: unknown) =>
    kube.json!(path, { method: 'POST', body, timeoutMs: 10_000 }).catch((e: unknown) => {
      if ((e as { status?: number }).status !== 409) throw e;
    });
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  const subjects = [{ kind: 'ServiceAccount', ...sa }];
  const role = (kind: 'ClusterRole' | 'Role', name: string) => ({ apiGroup: 'rbac.authorization.k8s.io', kind, name });
  await post(`/api/v1/namespaces/${sa.namespace}/serviceaccounts`, { metadata: { name: sa.name } });
  await post('/api/v1/namespaces', { metadata: { name: 'kr-load' } });
  await post(`${rbac}/clusterroles`, {
    metadata: { name: 'pod-reader' },
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
  });
  await post(`${rbac}/clusterrolebindings`, { metadata: { name: sa.name }, roleRef: role('ClusterRole', 'pod-reader'), subjects });
  await post(`${rbac}/namespaces/kr-load/roles`, {
    metadata: { name: 'load-writer' },
    rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] }],
  });
  await post(`${rbac}/namespaces/kr-load/rolebindings`, {
    metadata: { name: sa.name },
    roleRef: role('Role', 'load-writer'),
    subjects,
  });
  await post('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
    metadata: { name: sa.name },
    spec: {
      priorityLevelConfiguration: { name: LOAD_LEVEL },
      matchingPrecedence: 500,
      distinguisherMethod: { type: 'ByUser' },
      rules: [
        {
          subjects: [{ kind: 'ServiceAccount', serviceAccount: sa }],
          resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true }],
        },
      ],
    },
  });
  await until(
    'the FlowSchema taken in',
    async () => {
      const fs = await kube.json!<{ status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/${sa.name}`,
        { timeoutMs: 5000 },
      );
      return fs.status?.conditions?.some((c) => c.type === 'Dangling' && c.status === 'False') ?? false;
    },
    10_000,
  );
}

export interface Flow {
  /** Requests the load's FlowSchema dispatched so far. */
  dispatched: number;
  /** What its priority level executes now. */
  executing: number;
  /** The apiserver's requests in flight now. */
  inflight: number;
}

/** What the load's FlowSchema dispatched so far, what its priority level executes now, the apiserver's in-flight requests. */
export async function flow(kube: KubeAccess, sa: LoadIdentity = LOAD_SA): Promise<Flow> {
  const text = (await kube.raw('/metrics', { timeoutMs: 10_000 })).body;
  const sum = (name: string, match: (l: Record<string, string>) => boolean) =>
    series(text, name)
      .filter((x) => match(x.labels))
      .reduce((n, x) => n + x.value, 0);
  return {
    dispatched: sum('apiserver_flowcontrol_dispatched_requests_total', (l) => l.flow_schema === sa.name),
    executing: sum('apiserver_flowcontrol_current_executing_requests', (l) => l.priority_level === LOAD_LEVEL),
    inflight: sum('apiserver_current_inflight_requests', () => true),
  };
}

/** The load stopped: its priority level executes no more than `baseline`, and its FlowSchema dispatches nothing for 2 s. */
export const loadStopped = (kube: KubeAccess, baseline: number, within: number) =>
  until(
    'the load stopped',
    async () => {
      const a = await flow(kube);
      await realClock.sleep(2000);
      const b = await flow(kube);
      return b.dispatched === a.dispatched && b.executing <= baseline;
    },
    within,
    0,
  );

/** Reads a cgroup's CPU quota (`max` or `-1`: none; microseconds per period otherwise) and throttled periods, v1 or v2. */
export async function cpuCgroups(): Promise<{ quotaOf(cgroup: string): string; throttledOf(cgroup: string): number }> {
  const h = (await hierarchies())!;
  const root = h.version === 2 ? h.roots[0]! : h.roots.find((r) => basename(r).split(',').includes('cpu'))!;
  const file = (cg: string, f: 'quota' | 'stat') =>
    join(root, cg, f === 'stat' ? 'cpu.stat' : h.version === 2 ? 'cpu.max' : 'cpu.cfs_quota_us');
  return {
    quotaOf: (cg) => readFileSync(file(cg, 'quota'), 'utf8').trim().split(' ')[0]!,
    throttledOf: (cg) => Number(/nr_throttled (\d+)/.exec(readFileSync(file(cg, 'stat'), 'utf8'))![1]),
  };
}
