import { messageOf } from '../core/errors.js';
import type { Clock } from '../core/clock.js';
import type { RunControl } from './control.js';
import type { RunEventSink } from './events.js';
import type { PlannedAction } from './plan.js';

/**
 * `spec.remediation`, applied once when a guard says remediate (later requests get the same promise); without a
 * remediation the run aborts instead. A failed remediation aborts the run (unless it is already rolling back).
 */
export class Remediation {
  private applying: Promise<void> | undefined;

  constructor(
    private readonly actions: PlannedAction[],
    private readonly apply: (a: PlannedAction) => Promise<void>,
    private readonly control: RunControl,
    private readonly clock: Clock,
    private readonly emit: RunEventSink,
  ) {}

  request(reason: string): Promise<void> {
    if (this.applying) return this.applying;
    const { control, emit } = this;
    const at = () => this.clock.now();
    if (!this.actions.length) {
      emit({ type: 'log', at: at(), level: 'warn', message: `${reason}; the runbook has no remediation, aborting instead` });
      if (!control.rollingBack) control.abort('aborted', reason);
      return (this.applying = Promise.resolve());
    }
    emit({ type: 'remediation', at: at(), phase: 'start', detail: reason });
    this.applying = (async () => {
      try {
        for (const a of this.actions) await this.apply(a);
        emit({ type: 'remediation', at: at(), phase: 'end', detail: 'remediation applied' });
      } catch (e) {
        emit({ type: 'remediation', at: at(), phase: 'end', detail: `remediation failed: ${messageOf(e)}` });
        if (!control.rollingBack) control.abort('aborted', `${reason}; remediation failed: ${messageOf(e)}`);
        throw e;
      }
    })();
    return this.applying;
  }

  /** Resolves once a remediation under way has finished (failed or not). */
  async settled(): Promise<void> {
    await this.applying?.catch(() => {});
  }
}
