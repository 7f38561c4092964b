import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { Probe } from '../contract/probe.js';
import type { RunEventSink } from './events.js';
import type { AppliedFault, FaultLedger } from './faults.js';
import { waitForReading } from './probe-stream.js';

export interface RollbackOptions {
  signal: AbortSignal;
  /**
   * Each revert's own time (`revertTime`): a revert failing for a transient reason is tried again until this long
   * after it started (on the ledger's clock), whatever the reverts before it took.
   */
  revertMs: number;
  concurrency: number;
  /** Waits for a remediation a guard may still be applying (a run); recover has none. */
  settle?: () => Promise<void>;
  /** Whether remediations may be undone now: `rollback.waitFor` holds, or the user forces it. */
  safeToUndoRemediations: () => Promise<boolean>;
  /** Faults that cannot be reverted here (recover: a node missing from the journal's inventory). */
  skip?: (fault: AppliedFault) => boolean;
}

/**
 * The one rollback order, for a run and for `recover`: faults in the reverse order of application, then — only
 * once the cluster is healthy again — remediations and protective steps (restarting the controller-manager while
 * leases are still stale is the cascade). When the rollback condition does not hold, remediations are left in place
 * with their dead-men disarmed, for `recover`. A guard may ask for remediation while the faults are reverted: a
 * second round undoes it too. Returns the failures.
 */
export async function rollBack(ledger: FaultLedger, o: RollbackOptions): Promise<string[]> {
  const todo = (remediation: boolean) => ledger.outstanding().filter((f) => f.ref.remediation === remediation && !o.skip?.(f));
  const errors = await ledger.revertInOrder(todo(false), o.signal, o.concurrency, o.revertMs);
  for (let round = 0; round < 2; round++) {
    await o.settle?.();
    const remediations = todo(true);
    if (!remediations.length) break;
    if (!(await o.safeToUndoRemediations())) {
      await ledger.leaveInPlace(remediations, o.signal, 'the rollback condition did not hold', o.revertMs);
      break;
    }
    errors.push(...(await ledger.revertInOrder(remediations, o.signal, o.concurrency, o.revertMs)));
  }
  return errors;
}

/**
 * How long each revert is tried again: `faultTtl` from when that revert starts. By then a node that could not be
 * reached has reverted its faults by itself (its dead-man fires `faultTtl` after the last keepalive that reached it),
 * and a node that can be reached has answered; one unreachable node no longer shortens the others' reverts, which
 * start after it. A second interrupt stops at once as before.
 */
export const revertTime = (faultTtlMs: number): number => faultTtlMs;

export interface WaitFor {
  probeId: string;
  probe: Probe;
  params: Record<string, unknown>;
  withinMs: number;
}

/** Watches `rollback.waitFor` until it reads ok (true) or `withinMs` passes (false), reporting both as run events. */
export async function rollbackConditionHolds(ctx: Ctx, wf: WaitFor, signal: AbortSignal, emit: RunEventSink): Promise<boolean> {
  const at = () => ctx.clock.now();
  emit({ type: 'rollback-wait', at: at(), phase: 'start', detail: `waiting for ${wf.probeId} to read ok before undoing remediation` });
  const { met, last } = await waitForReading(ctx, wf.probe, wf.params, 'ok', wf.withinMs, signal);
  emit({
    type: 'rollback-wait',
    at: at(),
    phase: met ? 'ok' : 'timeout',
    detail: met ? last : `not ok within ${formatDuration(wf.withinMs)} (last reading ${last}); remediation left in place`,
  });
  return met;
}
