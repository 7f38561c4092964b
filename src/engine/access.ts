import { type ApiVerb, type ResolvedAccess, accessChecks, describeCheck, resolveAccess } from '../contract/access.js';
import type { Probe } from '../contract/probe.js';
import type { Registry } from '../contract/registry.js';
import { HALT_NAME, haltNamespaces } from '../kube/halt.js';
import { RUN_LOCK_NAME } from './run-lock-lease.js';
import type { AccessCheck } from '../kube/types.js';
import { type Plan, plannedActions } from './plan.js';
import { agentTargets } from './agents.js';

/** A permission and who needs it: a module (`probe node-ready`), or the engine itself. */
export interface NeededAccess {
  by: string;
  access: ResolvedAccess;
}

/** What the engine itself reads, whatever the runbook: Nodes for node selectors, /version for preflight and `orElse`. */
const ENGINE_ACCESS: NeededAccess[] = [
  { by: 'engine', access: { apiGroup: '', resource: 'nodes', verbs: ['list'] } },
  { by: 'engine', access: { nonResourceURL: '/version', verbs: ['get'] } },
];

/**
 * The cluster-wide run lock: one Lease in spec.safety.lockNamespace, created once, then read and renewed by name; and
 * the halts that stop the run, read only (src/kube/halt.ts): the cluster's in kube-system, and the one beside the lock.
 */
const runLockAccess = (namespace: string): NeededAccess[] => [
  ...haltNamespaces(namespace).map((ns): NeededAccess => ({
    by: 'the halt',
    access: { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['get'], namespace: ns, name: HALT_NAME },
  })),
  { by: 'the run lock', access: { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['create'], namespace } },
  {
    by: 'the run lock',
    access: { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'update'], namespace, name: RUN_LOCK_NAME },
  },
];

/**
 * The node agents (spec.transport type agent), per agent namespace: their pods created and deleted, the scripts handed
 * to them as ConfigMaps and their results read, the run Lease they follow written.
 */
function agentAccess(plan: Plan): NeededAccess[] {
  const namespaces = new Set(
    agentTargets(
      plan.inventory,
      plannedActions(plan).flatMap((a) => a.targets ?? []),
    ).map((t) => t.config.namespace),
  );
  return [...namespaces].flatMap((namespace): NeededAccess[] => [
    { by: 'the node agents', access: { apiGroup: '', resource: 'pods', verbs: ['create', 'get', 'list', 'delete'], namespace } },
    { by: 'the node agents', access: { apiGroup: '', resource: 'secrets', verbs: ['create', 'list', 'delete'], namespace } },
    { by: 'the node agents', access: { apiGroup: '', resource: 'configmaps', verbs: ['create', 'get', 'list', 'delete'], namespace } },
    {
      by: 'the node agents',
      access: { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['create', 'get', 'update', 'delete'], namespace },
    },
  ]);
}

/** A probe started beside the plan: the run's observers (report.json: observations). */
export interface ObserverProbe {
  name: string;
  probe: Probe;
  params: Record<string, unknown>;
}

/**
 * Every API permission a run needs: the engine's, each planned action's and probe's (guards, expects, the
 * rollback's wait, the recovery objectives) `meta.access` with its params, and the observers'.
 */
export function planAccess(plan: Plan, observers: readonly ObserverProbe[] = []): NeededAccess[] {
  const out = [...ENGINE_ACCESS, ...runLockAccess(plan.safety.lockNamespace), ...agentAccess(plan)];
  const add = (by: string, declared: Parameters<typeof resolveAccess>[0], params: Record<string, unknown>) => {
    for (const access of resolveAccess(declared, params)) out.push({ by, access });
  };
  const probes = [
    ...plan.guards,
    ...plan.steps.flatMap((s) => (s.kind === 'parallel' ? s.children : [s])).filter((s) => s.kind === 'expect'),
    ...(plan.rollback.waitFor ? [plan.rollback.waitFor] : []),
    // the recovery objectives' clocks, the run's and each step's
    ...plan.objectives,
  ];
  for (const p of probes) add(`probe ${p.probeId}`, p.probe.meta.access, p.params);
  for (const o of observers) add(`observer ${o.probe.meta.id}`, o.probe.meta.access, o.params);
  for (const a of plannedActions(plan)) add(`action ${a.actionId}`, a.action.meta.access, a.params);
  return out;
}

/**
 * planAccess, and for a plan made without the server's version (`kube-runbook manifests`) also what each `orElse`
 * still to choose from needs (with the same params), since either may run.
 */
export async function planAccessAnyServer(
  plan: Plan,
  registry: Registry,
  observers: readonly ObserverProbe[] = [],
): Promise<NeededAccess[]> {
  const out = planAccess(plan, observers);
  for (const a of plannedActions(plan)) {
    if (!a.orElse) continue;
    const fallback = await registry.action(a.orElse);
    for (const access of resolveAccess(fallback.meta.access, a.params)) out.push({ by: `action ${a.orElse}`, access });
  }
  return out;
}

/** One SelfSubjectAccessReview per distinct permission, each with everyone that needs it. */
export function distinctChecks(needed: readonly NeededAccess[]): { check: AccessCheck; by: string[] }[] {
  const byKey = new Map<string, { check: AccessCheck; by: string[] }>();
  for (const n of needed)
    for (const check of accessChecks([n.access])) {
      const key = describeCheck(check);
      const entry = byKey.get(key) ?? { check, by: [] };
      if (!entry.by.includes(n.by)) entry.by.push(n.by);
      byKey.set(key, entry);
    }
  return [...byKey.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, v]) => v);
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
  verbs: string[];
}

/** RBAC rules granting exactly `needed`: cluster-wide ones for a ClusterRole, the others per namespace for a Role. */
export function rbacRules(needed: readonly NeededAccess[]): { cluster: PolicyRule[]; namespaced: Record<string, PolicyRule[]> } {
  const verbs = new Map<string, Set<ApiVerb | 'get'>>();
  for (const { access } of needed) {
    const key =
      'nonResourceURL' in access
        ? `url|${access.nonResourceURL}`
        : `res|${access.namespace ?? ''}|${access.apiGroup}|${access.resource}|${access.name ?? ''}`;
    const set = verbs.get(key) ?? new Set();
    for (const v of access.verbs) set.add(v);
    verbs.set(key, set);
  }
  const cluster: PolicyRule[] = [];
  const namespaced: Record<string, PolicyRule[]> = {};
  const order: ApiVerb[] = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'impersonate'];
  for (const [key, set] of [...verbs.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const vs = order.filter((v) => set.has(v));
    const [kind, ...rest] = key.split('|');
    if (kind === 'url') {
      cluster.push({ nonResourceURLs: [rest[0]!], verbs: vs });
      continue;
    }
    const [namespace, group, resource, name] = rest as [string, string, string, string];
    const rule = { apiGroups: [group], resources: [resource], ...(name ? { resourceNames: [name] } : {}), verbs: vs };
    if (namespace) (namespaced[namespace] ??= []).push(rule);
    else cluster.push(rule);
  }
  return { cluster, namespaced };
}
