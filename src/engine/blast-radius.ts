import type { DocPath } from '../document/problems.js';
import type { InventoryNode } from '../inventory/schema.js';

/** A limit as written: a count of nodes, or a percentage (`"50%"`) of the inventory's nodes of that role. */
type Limit = number | string;
export interface MaxUnavailable {
  controlPlane: Limit;
  worker: Limit;
}

/** What this check needs of a planned step (structurally: plan.ts's PlannedStep). */
interface Faulting {
  kind: 'action';
  name: string;
  /** Where the step is in the runbook. */
  at: DocPath;
  /** Whether the runbook gives `with.nodes`: the problem is reported there, else at `action`. */
  nodesGiven: boolean;
  targets: InventoryNode[] | null;
  revertLast: boolean;
}
type StepLike =
  | Faulting
  | { kind: 'parallel'; children: ({ kind: string } | Faulting)[] }
  | { kind: 'revert'; target: Faulting }
  | { kind: 'expect' | 'wait' | 'confirm' };

type Role = keyof MaxUnavailable;
const ROLE_WORDS: Record<Role, string> = { controlPlane: 'control-plane', worker: 'worker' };

/** Control-plane and etcd members count as control plane; everything else as workers. */
const roleOf = (n: InventoryNode): Role => (n.roles.some((r) => r === 'control-plane' || r === 'etcd') ? 'controlPlane' : 'worker');

/** A percentage rounds up (as a PodDisruptionBudget's does), so "50%" of one node is that node. */
const isFaulting = (c: { kind: string }): c is Faulting => c.kind === 'action';

function resolveLimit(limit: Limit, total: number): number {
  return typeof limit === 'number' ? limit : Math.ceil((Number(limit.slice(0, -1)) / 100) * total);
}

/** A step that would fault more nodes of a role at once than allowed: where it is, and why. */
export interface BlastRadiusProblem {
  path: DocPath;
  message: string;
}

/**
 * The steps that would have more nodes of a role faulted at once than spec.safety.maxUnavailable allows (the first,
 * per role). Walks the steps in order: an action step adds its targets until the run ends or a `revert` step takes
 * them back; a parallel step adds all its children. Protective steps (revertLast) and remediations are not faults
 * and do not count: stopping every kubelet to keep containers alive is what they are for.
 */
export function blastRadiusProblems(steps: StepLike[], inventory: InventoryNode[], limits: MaxUnavailable): BlastRadiusProblem[] {
  const problems: BlastRadiusProblem[] = [];
  const reported = new Set<Role>();
  const totals: Record<Role, number> = { controlPlane: 0, worker: 0 };
  for (const n of inventory) totals[roleOf(n)]++;
  const down = new Map<string, { role: Role; step: Faulting }>();
  const by = new Map<Faulting, string[]>();
  const add = (a: Faulting) => {
    if (a.revertLast || !a.targets) return;
    for (const n of a.targets) down.set(n.name, { role: roleOf(n), step: a });
    by.set(
      a,
      a.targets.map((n) => n.name),
    );
    for (const role of ['controlPlane', 'worker'] as const) {
      const limit = resolveLimit(limits[role], totals[role]);
      const nodes = [...down].filter(([, d]) => d.role === role).map(([name]) => name);
      if (nodes.length <= limit || reported.has(role)) continue;
      reported.add(role);
      problems.push({
        path: [...a.at, ...(a.nodesGiven ? ['with', 'nodes'] : ['action'])],
        message:
          `${a.name}: ${nodes.length} of ${totals[role]} ${ROLE_WORDS[role]} nodes would be faulted at once (${nodes.join(', ')}), ` +
          `more than spec.safety.maxUnavailable.${role} allows (${JSON.stringify(limits[role])}${typeof limits[role] === 'string' ? ` = ${limit}` : ''}); ` +
          `narrow the steps' nodes, add a revert step, or raise the limit`,
      });
    }
  };
  for (const s of steps) {
    if (s.kind === 'action') add(s);
    else if (s.kind === 'parallel') {
      for (const c of s.children) if (isFaulting(c)) add(c);
    } else if (s.kind === 'revert') for (const name of by.get(s.target) ?? []) if (down.get(name)?.step === s.target) down.delete(name);
  }
  return problems;
}
