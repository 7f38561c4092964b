import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type KubeConfig, type V1Lease, Watch } from '@kubernetes/client-node';
import { realClock } from '../../../src/core/clock.js';
import { hierarchies } from '../../../packages/lab/src/host/node-cgroup.js';
import { series } from '../../../src/kube/prometheus.js';
import type { KubeAccess } from '../../../src/kube/types.js';
import { until } from './lab.js';

/**
 * What a test of examples/control-plane-overload*.yaml (or of load-apiserver) sets up to count the load apart: a
 * FlowSchema into `workload-low` (where the built-in `service-accounts` one puts it anyway) for the ServiceAccounts of
 * kr-load, where the run makes the load's identity; and what a test reads of the load and of a cgroup's CPU quota.
 */
export interface LoadFlowSchema {
  /** The FlowSchema's name. */
  name: string;
  /** Its subject: a group, or one ServiceAccount `{namespace, name}`. */
  subject: { group: string } | { namespace: string; name: string };
  /** The resources it takes their requests for (default all: `*`). */
  resources?: string[];
}

/** The examples' load: every ServiceAccount of kr-load, the identities runs make for their loads. */
const LOAD_FS: LoadFlowSchema = { name: 'kr-load', subject: { group: 'system:serviceaccounts:kr-load' } };
const LOAD_LEVEL = 'workload-low';

/** Creates the FlowSchema that counts the load apart (kept when it exists); waits for the apiserver to take it in. */
export async function countLoadApart(kube: KubeAccess, fs: LoadFlowSchema = LOAD_FS): Promise<void> {
  const subject =
    'group' in fs.subject ? { kind: 'Group', group: { name: fs.subject.group } } : { kind: 'ServiceAccount', serviceAccount: fs.subject };
  await kube.json!('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
    method: 'POST',
    body: {
      metadata: { name: fs.name },
      spec: {
        priorityLevelConfiguration: { name: LOAD_LEVEL },
        matchingPrecedence: 500,
        distinguisherMethod: { type: 'ByUser' },
        rules: [
          {
            subjects: [subject],
            resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: fs.resources ?? ['*'], namespaces: ['*'], clusterScope: true }],
          },
        ],
      },
    },
    timeoutMs: 10_000,
  }).catch((e: unknown) => {
    if ((e as { status?: number }).status !== 409) throw e;
  });
  await until(
    'the FlowSchema taken in',
    async () => {
      const got = await kube.json!<{ status?: { conditions?: { type: string; status: string }[] } }>(
        `/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/${fs.name}`,
        { timeoutMs: 5000 },
      );
      return got.status?.conditions?.some((c) => c.type === 'Dangling' && c.status === 'False') ?? false;
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
export async function flow(kube: KubeAccess, fs: Pick<LoadFlowSchema, 'name'> = LOAD_FS): Promise<Flow> {
  const text = (await kube.raw('/metrics', { timeoutMs: 10_000 })).body;
  const sum = (name: string, match: (l: Record<string, string>) => boolean) =>
    series(text, name)
      .filter((x) => match(x.labels))
      .reduce((n, x) => n + x.value, 0);
  return {
    dispatched: sum('apiserver_flowcontrol_dispatched_requests_total', (l) => l.flow_schema === fs.name),
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

/** What is left of the identities runs made for their loads: their ServiceAccounts, ClusterRoles and bindings, by kind/name. */
export async function loadIdentitiesLeft(kube: KubeAccess): Promise<string[]> {
  const query = { labelSelector: 'kube-runbook/load-identity' };
  const names = async (kind: string, path: string) =>
    (await kube.json!<{ items: { metadata: { name: string } }[] }>(path, { query, timeoutMs: 10_000 })).items.map(
      (i) => `${kind}/${i.metadata.name}`,
    );
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  return [
    ...(await names('ServiceAccount', '/api/v1/serviceaccounts')),
    ...(await names('Secret', '/api/v1/namespaces/kr-load/secrets')),
    ...(await names('ClusterRole', `${rbac}/clusterroles`)),
    ...(await names('ClusterRoleBinding', `${rbac}/clusterrolebindings`)),
    ...(await names('Role', `${rbac}/roles`)),
    ...(await names('RoleBinding', `${rbac}/rolebindings`)),
  ];
}

/** The latest node Lease renewal a watch saw: how much later than its interval it came, and whose. */
export interface LatestRenewal {
  node: string;
  latenessMs: number;
}

/**
 * Watches the node Leases and keeps the latest renewal: each renewal's gap since the node's previous one, less the
 * renew interval (a quarter of the Lease's duration, as the kubelet renews). Only gaps between two events of one watch
 * count: a watch that ends (a starved apiserver drops it) is opened again from a fresh list, so renewals it could not
 * see are never taken for a late one. `stop()` ends it and gives the latest.
 */
export function watchRenewals(kc: KubeConfig): { stop(): Promise<LatestRenewal> } {
  let latest: LatestRenewal = { node: '', latenessMs: 0 };
  let stopped = false;
  let current: AbortController | undefined;
  let opening: Promise<void> = Promise.resolve();
  const open = (): void => {
    if (stopped) return;
    const seen = new Map<string, number>();
    opening = new Watch(kc)
      .watch(
        '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases',
        {},
        (type: string, lease: V1Lease) => {
          const node = lease.metadata?.name ?? '';
          const renewed = lease.spec?.renewTime ? new Date(lease.spec.renewTime as unknown as string).getTime() : undefined;
          if (renewed === undefined) return;
          const before = seen.get(node);
          seen.set(node, renewed);
          if (type !== 'MODIFIED' || before === undefined || renewed <= before) return;
          const late = renewed - before - (lease.spec?.leaseDurationSeconds ?? 40) * 250;
          if (late > latest.latenessMs) latest = { node, latenessMs: late };
        },
        () => void realClock.sleep(500).then(open),
      )
      .then(
        (ac) => {
          current = ac;
          if (stopped) ac.abort();
        },
        () => void realClock.sleep(500).then(open),
      );
  };
  open();
  return {
    async stop() {
      stopped = true;
      await opening;
      current?.abort();
      return latest;
    },
  };
}
