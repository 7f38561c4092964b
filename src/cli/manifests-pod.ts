import { createHash } from 'node:crypto';
import { type Plan, plannedActions } from '../engine/plan.js';

/** What the executor's Job needs of its run's time, from the runbook's spec.safety and rollback (seconds). */
export interface RunDeadlines {
  /** Rollback after SIGTERM: faultTtl (the reverts' deadline) + rollback.waitFor's `within` + the run's last writes. */
  terminationGracePeriodSeconds: number;
  /** Preflight + maxDuration + that rollback: a run that ends by itself always ends before it. */
  activeDeadlineSeconds: number;
}

/** Preflight (RBAC checks, agents started, steady state) before maxDuration starts counting. */
const PREFLIGHT_MS = 5 * 60_000;
/** After the reverts: the lock released, the agents deleted, the report and the journal's copy written. */
const LAST_WRITES_MS = 60_000;

export function runDeadlines(plan: Plan): RunDeadlines {
  const rollbackMs = plan.safety.faultTtl + (plan.rollback.waitFor ? plan.rollback.withinMs : 0) + LAST_WRITES_MS;
  return {
    terminationGracePeriodSeconds: Math.ceil(rollbackMs / 1000),
    activeDeadlineSeconds: Math.ceil((PREFLIGHT_MS + plan.safety.maxDuration + rollbackMs) / 1000),
  };
}

/** The Nodes the runbook acts on (its steps' and its remediations'), as far as the plan resolves them without the cluster. */
export const faultedNodes = (plan: Plan): string[] =>
  [...new Set(plannedActions(plan).flatMap((a) => (a.targets ?? []).map((n) => n.name)))].sort();

/** Eight hex digits of a SHA-256 of the parts: a name suffix that changes with what it names. */
export const shortHash = (...parts: string[]): string => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 8);
};

/**
 * Of `restricted` Pod Security: the executor runs as its image's uid 1000, with no privilege at all. fsGroup makes the
 * kubelet give the ssh Secret's files (root's, mode 0400) to group 1000 and let it read them (0440): the key stays
 * unreadable to anyone else, and ssh accepts it, as it is not owned by the user reading it.
 */
export const RESTRICTED_POD = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 1000,
  seccompProfile: { type: 'RuntimeDefault' },
} as const;
export const RESTRICTED_CONTAINER = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
} as const;
/** The executor's footprint, as the memory benchmarks measure it on small and large clusters (BENCHMARKS.md). */
export const EXECUTOR_RESOURCES = { requests: { cpu: '100m', memory: '256Mi' } } as const;

/** Labels that make the namespace admit only pods that pass the `restricted` Pod Security Standard. */
export const RESTRICTED_NAMESPACE_LABELS = {
  'pod-security.kubernetes.io/enforce': 'restricted',
  'pod-security.kubernetes.io/enforce-version': 'latest',
  'pod-security.kubernetes.io/warn': 'restricted',
  'pod-security.kubernetes.io/warn-version': 'latest',
  'pod-security.kubernetes.io/audit': 'restricted',
  'pod-security.kubernetes.io/audit-version': 'latest',
} as const;

/** Keeps the pod off the Nodes the runbook faults: a node whose kubelet or network is cut is no place to roll back from. */
export function avoidingNodes(nodes: readonly string[]): Record<string, unknown> | undefined {
  if (!nodes.length) return undefined;
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: [...nodes] }] }],
      },
    },
  };
}
