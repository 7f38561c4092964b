import type { Clock } from '../core/clock.js';
import { formatDuration } from '../core/duration.js';
import type { RunStatus } from './events.js';

/** The run was stopped (abort, interrupt, a declined confirmation): not a failure of the step itself. */
export class Aborted extends Error {}

export interface Outcome {
  status: RunStatus;
  reason: string;
}

/**
 * How a run ends, shared by its parts: `steps` stops the steps (rollback still runs), `hard` stops everything
 * (a second interrupt). The first reason given is the run's reason.
 */
export class RunControl {
  readonly steps = new AbortController();
  readonly hard = new AbortController();
  outcome: Outcome | undefined;
  /** Something was applied (or its apply begun), so a failure is `failed`, not `refused`. */
  applied = false;
  rollingBack = false;

  abort(status: RunStatus, reason: string): void {
    if (!this.outcome) this.outcome = { status, reason };
    this.steps.abort(new Aborted(reason));
  }

  /** Runs `fn` with a signal that aborts after `ms` or when the steps stop; rejects at that moment. */
  async withTimeout<T>(clock: Clock, ms: number, what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const local = new AbortController();
    const stepsSignal = this.steps.signal;
    const onAbort = () => local.abort(stepsSignal.reason);
    // stopped already (a guard that fired as this step armed the guards): its listener would never be called
    if (stepsSignal.aborted) onAbort();
    else stepsSignal.addEventListener('abort', onAbort, { once: true });
    const cancel = clock.setTimer(ms, () => local.abort(new Error(`${what} did not finish within ${formatDuration(ms)}`)));
    try {
      return await Promise.race([
        fn(local.signal),
        new Promise<never>((_, reject) => {
          if (local.signal.aborted) reject(local.signal.reason);
          local.signal.addEventListener('abort', () => reject(local.signal.reason), { once: true });
        }),
      ]);
    } finally {
      cancel();
      stepsSignal.removeEventListener('abort', onAbort);
    }
  }
}
