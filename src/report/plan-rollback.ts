import { type Plan, type PlannedAction, stepActions } from '../engine/plan.js';

/** One thing the rollback does, in the order it does it. */
export type RollbackEntry =
  | { kind: 'revert'; action: PlannedAction; unlessRevertedEarly: boolean }
  | { kind: 'wait'; waitFor: NonNullable<Plan['rollback']['waitFor']>; withinMs: number }
  | { kind: 'undo-remediation'; action: PlannedAction };

/** The rollback order the engine follows: step faults in reverse, then the wait, then remediations in reverse. */
export function rollbackOrder(plan: Plan): RollbackEntry[] {
  const early = new Set(plan.steps.filter((s) => s.kind === 'revert').map((s) => s.target));
  const revert = (a: PlannedAction): RollbackEntry => ({ kind: 'revert', action: a, unlessRevertedEarly: early.has(a) });
  const reversed = stepActions(plan.steps).reverse();
  const out = reversed.filter((a) => !a.revertLast).map(revert);
  const last: RollbackEntry[] = [
    ...reversed.filter((a) => a.revertLast).map(revert),
    ...[...plan.remediation].reverse().map((a): RollbackEntry => ({ kind: 'undo-remediation', action: a })),
  ];
  if (last.length) {
    const wf = plan.rollback.waitFor;
    if (wf) out.push({ kind: 'wait', waitFor: wf, withinMs: plan.rollback.withinMs });
    out.push(...last);
  }
  return out;
}
