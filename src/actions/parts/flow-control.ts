import type { Json } from '../../contract/action.js';
import { series } from '../../kube/prometheus.js';

/**
 * API Priority and Fairness (flowcontrol.apiserver.k8s.io/v1) as `shed-apiserver-load` reads and writes it. A request
 * is classified by the FlowSchema of lowest `matchingPrecedence` whose rules match it (ties: the name first in
 * lexical order), and served by that FlowSchema's PriorityLevelConfiguration.
 */
export const FLOWCONTROL = '/apis/flowcontrol.apiserver.k8s.io/v1';
export const NAME_PREFIX = 'kube-runbook-shed-';

/**
 * The stock priority levels that serve the cluster's own heartbeat and control loops (1.37's bootstrap
 * configuration): exempt (system:masters, probes), leader-election (controller-manager and scheduler leader
 * Leases), node-high (kubelets' Lease renewals and node status), system (the rest of the kubelets' requests),
 * workload-high (the controllers, the scheduler, kube-system's ServiceAccounts). Never shed.
 */
export const PROTECTED_LEVELS: readonly string[] = ['exempt', 'leader-election', 'node-high', 'system', 'workload-high'];

export type Subject =
  | { kind: 'User'; user: { name: string } }
  | { kind: 'Group'; group: { name: string } }
  | { kind: 'ServiceAccount'; serviceAccount: { namespace: string; name: string } };

export interface FlowSchema {
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    matchingPrecedence?: number;
    priorityLevelConfiguration: { name: string };
    distinguisherMethod?: { type: string };
    rules?: { subjects: Subject[] }[];
  };
}

/** Why shedding this subject would starve the cluster's own heartbeat or control loops; undefined when it would not. */
export function protectedSubject(s: Subject): string | undefined {
  if (s.kind === 'Group') {
    if (s.group.name === 'system:masters') return 'system:masters is exempt: the cluster administrators';
    if (s.group.name === 'system:nodes') return "system:nodes are the kubelets: their Lease renewals are the nodes' heartbeat";
    if (s.group.name === 'system:serviceaccounts:kube-system') return "kube-system's ServiceAccounts run the cluster's controllers";
  }
  if (s.kind === 'User') {
    const n = s.user.name;
    if (n.startsWith('system:node:')) return `${n} is a kubelet: its Lease renewals are its node's heartbeat`;
    if (n === 'system:kube-controller-manager') return "the controller-manager's leader election and control loops";
    if (n === 'system:kube-scheduler') return "the scheduler's leader election";
    if (n === 'system:apiserver') return "the apiserver's own requests";
  }
  if (s.kind === 'ServiceAccount' && s.serviceAccount.namespace === 'kube-system')
    return "kube-system's ServiceAccounts run the cluster's controllers";
  return undefined;
}

export const subjectText = (s: Subject): string =>
  s.kind === 'User'
    ? `user ${s.user.name}`
    : s.kind === 'Group'
      ? `group ${s.group.name}`
      : `serviceaccount ${s.serviceAccount.namespace}/${s.serviceAccount.name}`;

const sameSubject = (a: Subject, b: Subject): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Why these subjects may not be shed: one of the rules above, or the subject is named by a FlowSchema of a protected
 * level (a cluster's own additions included); undefined when they may.
 */
export function protectedWhy(subjects: readonly Subject[], schemas: readonly FlowSchema[]): string | undefined {
  for (const s of subjects) {
    const why = protectedSubject(s);
    if (why) return `${subjectText(s)}: ${why}`;
    const by = schemas.find(
      (f) =>
        PROTECTED_LEVELS.includes(f.spec.priorityLevelConfiguration.name) &&
        (f.spec.rules ?? []).some((r) => r.subjects.some((x) => sameSubject(x, s))),
    );
    if (by)
      return `${subjectText(s)} is classified by the FlowSchema ${by.metadata.name} into the protected level ${by.spec.priorityLevelConfiguration.name}`;
  }
  return undefined;
}

/** The largest matchingPrecedence of a FlowSchema of a protected level: a FlowSchema above it never takes their requests. */
export const protectedPrecedence = (schemas: readonly FlowSchema[]): number =>
  Math.max(
    0,
    ...schemas
      .filter((f) => PROTECTED_LEVELS.includes(f.spec.priorityLevelConfiguration.name))
      .map((f) => f.spec.matchingPrecedence ?? 1000),
  );

const DISPATCHED = 'apiserver_flowcontrol_dispatched_requests_total';
const REJECTED = 'apiserver_flowcontrol_rejected_requests_total';
const IN_QUEUE = 'apiserver_flowcontrol_current_inqueue_requests';

/** Requests dispatched and rejected so far, and waiting now, per FlowSchema, from the apiserver's /metrics. */
function flowCounts(metrics: string): Map<string, { total: number; inQueue: number }> {
  const out = new Map<string, { total: number; inQueue: number }>();
  const of = (labels: Record<string, string>) => {
    const name = labels.flow_schema ?? labels.flowSchema ?? '';
    let c = out.get(name);
    if (!c) out.set(name, (c = { total: 0, inQueue: 0 }));
    return c;
  };
  for (const s of [...series(metrics, DISPATCHED), ...series(metrics, REJECTED)]) of(s.labels).total += s.value;
  for (const s of series(metrics, IN_QUEUE)) of(s.labels).inQueue += s.value;
  return out;
}

/**
 * The busiest FlowSchemas between two readings of /metrics: requests dispatched and rejected in between, plus those
 * waiting at the end. A counter that went down was reset (the apiserver restarted, or another member answered): it
 * counts afresh.
 */
export function busiest(before: string, after: string): { name: string; requests: number }[] {
  const a = flowCounts(before);
  return [...flowCounts(after)]
    .map(([name, c]) => {
      const d = c.total - (a.get(name)?.total ?? 0);
      return { name, requests: (d >= 0 ? d : c.total) + c.inQueue };
    })
    .filter((f) => f.name !== '' && f.requests > 0)
    .sort((x, y) => y.requests - x.requests || x.name.localeCompare(y.name));
}

export interface Shaping {
  shares: number;
  queueLength: number;
}

export const labelsOf = (runId: string): Record<string, string> => ({
  'app.kubernetes.io/managed-by': 'kube-runbook',
  'kube-runbook/run': runId
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, ''),
});

/** The low priority level: few shares, none lent or borrowed, one short queue (the rest is rejected with 429). */
export function levelObject(name: string, labels: Record<string, string>, s: Shaping): { [k: string]: Json } {
  return {
    apiVersion: 'flowcontrol.apiserver.k8s.io/v1',
    kind: 'PriorityLevelConfiguration',
    metadata: { name, labels },
    spec: {
      type: 'Limited',
      limited: {
        nominalConcurrencyShares: s.shares,
        lendablePercent: 0,
        borrowingLimitPercent: 0,
        limitResponse: { type: 'Queue', queuing: { queues: 1, handSize: 1, queueLengthLimit: s.queueLength } },
      },
    },
  };
}

export function schemaObject(
  name: string,
  labels: Record<string, string>,
  level: string,
  precedence: number,
  rules: Json[],
  distinguisher: string | undefined,
): { [k: string]: Json } {
  return {
    apiVersion: 'flowcontrol.apiserver.k8s.io/v1',
    kind: 'FlowSchema',
    metadata: { name, labels },
    spec: {
      priorityLevelConfiguration: { name: level },
      matchingPrecedence: precedence,
      ...(distinguisher ? { distinguisherMethod: { type: distinguisher } } : {}),
      rules,
    },
  };
}
