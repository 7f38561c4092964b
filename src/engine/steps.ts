import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import { withDeclarations } from './declarations.js';
import type { Confirmer } from './confirm.js';
import { Aborted, type RunControl } from './control.js';
import type { RunEventSink, StepStatus } from './events.js';
import { eachLimited } from '../core/each-limited.js';
import type { AppliedFault, FaultLedger } from './faults.js';
import type { GuardSet } from './guards.js';
import { type Plan, type PlannedAction, type PlannedStep, stepActions } from './plan.js';
import { waitForReading } from './probe-stream.js';

export interface StepDeps {
  plan: Plan;
  ctx: Ctx;
  emit: RunEventSink;
  confirmer: Confirmer;
  ledger: FaultLedger;
  guards: GuardSet;
  control: RunControl;
  /** How many targets of one step are changed at once. */
  concurrency: number;
}

/** The step interpreter: runs the plan's steps in order until one fails or the run is stopped. */
export class StepRunner {
  constructor(private readonly d: StepDeps) {}

  /** Applies an action on each of its targets, through the ledger's one queue (guards are armed from the first). */
  async applyAction(a: PlannedAction, remediation: boolean, signal: AbortSignal): Promise<void> {
    const { ledger, guards, control } = this.d;
    await ledger.serial(async () => {
      if (signal.aborted) throw new Aborted('stopped before applying');
      guards.arm();
      control.applied = true;
      const on = {
        step: `${a.index} ${a.name}`,
        remediation,
        signal,
        deadline: this.d.ctx.clock.now() + a.timeoutMs,
        ...(a.targets ? { selection: a.targets.map((t) => t.name) } : {}),
      };
      await eachLimited(a.targets ?? [undefined], this.d.concurrency, async (node) => {
        await ledger.apply(a.action, a.params, node, on);
      });
    });
  }

  /** Runs every step; a failure or an abort ends the steps and records the run's outcome. */
  async runAll(): Promise<void> {
    const { plan, control } = this.d;
    for (const step of plan.steps) {
      if (control.steps.signal.aborted) break;
      try {
        await this.waitForGuards();
        await this.runTracked(step);
      } catch (e) {
        if (control.steps.signal.aborted) break;
        const noFault = !control.applied && stepActions(plan.steps).length > 0;
        const what = `step ${step.index} "${step.name}" failed: ${messageOf(e)}`;
        control.abort(noFault ? 'refused' : 'failed', noFault ? `nothing applied: ${what}` : what);
        break;
      }
    }
  }

  private async waitForGuards(): Promise<void> {
    const { guards, plan, control, ctx } = this.d;
    const holding = guards.holdingGuards();
    if (!holding.length) return;
    this.d.emit({
      type: 'log',
      at: ctx.clock.now(),
      level: 'info',
      message: `waiting for guards that cannot see yet: ${holding.join(', ')}`,
    });
    const bound = Math.max(...plan.guards.filter((g) => holding.includes(g.name)).map((g) => g.unknownForMs));
    await control
      .withTimeout(ctx.clock, bound, 'guards', (signal) => guards.clear(signal))
      .catch((e: unknown) => {
        if (control.steps.signal.aborted) throw e;
        throw new Error(`guards still cannot see after ${formatDuration(bound)}: ${guards.holdingGuards().join(', ')}`);
      });
  }

  private async runTracked(step: PlannedStep): Promise<void> {
    const { emit, ctx, control } = this.d;
    // Guards react from the first step that is not a steady-state check: the first fault, or, in a runbook that
    // only observes, its first wait or confirmation.
    if (step.kind !== 'expect') this.d.guards.arm();
    // a guard that read a violation before it was armed acts as it is armed: then this step does not start
    if (control.steps.signal.aborted) throw new Aborted(control.outcome?.reason ?? 'aborted');
    const at = () => ctx.clock.now();
    emit({ type: 'step-start', at: at(), index: step.index, name: step.name, kind: step.kind });
    try {
      const detail = await this.run(step);
      emit({ type: 'step-end', at: at(), index: step.index, name: step.name, kind: step.kind, status: 'passed', detail });
    } catch (e) {
      const aborted = control.steps.signal.aborted;
      const status: StepStatus = aborted ? 'aborted' : 'failed';
      const detail = aborted ? (control.outcome?.reason ?? messageOf(e)) : messageOf(e);
      emit({ type: 'step-end', at: at(), index: step.index, name: step.name, kind: step.kind, status, detail });
      throw e;
    }
  }

  private async run(step: PlannedStep): Promise<string> {
    const { ctx, control } = this.d;
    switch (step.kind) {
      case 'action':
        await control.withTimeout(ctx.clock, step.timeoutMs, `step "${step.name}"`, (signal) =>
          this.applyAction(step, step.revertLast, signal),
        );
        return step.targets ? `applied on ${step.targets.map((t) => t.name).join(', ')}` : 'applied';
      case 'expect':
        return this.expect(step);
      case 'wait':
        await ctx.clock.sleep(step.ms, control.steps.signal);
        return `waited ${formatDuration(step.ms)}`;
      case 'confirm':
        return this.confirm(step);
      case 'revert':
        return this.revertStep(step);
      case 'parallel': {
        // the first child to fail stops its siblings (through the run's abort) and fails the group
        await Promise.all(
          step.children.map((c) =>
            this.runTracked(c).catch((e: unknown) => {
              if (!control.steps.signal.aborted)
                control.abort(control.applied ? 'failed' : 'refused', `step ${c.index} "${c.name}" failed: ${messageOf(e)}`);
              throw e;
            }),
          ),
        );
        return `${step.children.length} steps`;
      }
    }
  }

  private async expect(step: Extract<PlannedStep, { kind: 'expect' }>): Promise<string> {
    const { ctx, control } = this.d;
    const r = await waitForReading(ctx, step.probe, step.params, step.status, step.withinMs, control.steps.signal, (reading) =>
      this.d.emit({ type: 'step-reading', at: reading.at, index: step.index, reading, ...withDeclarations(step.probe) }),
    );
    if (r.met) return r.last;
    if (control.steps.signal.aborted) throw new Aborted(control.outcome?.reason ?? 'aborted');
    throw new Error(
      r.timedOut
        ? `did not read ${step.status} within ${formatDuration(step.withinMs)}; last reading ${r.last}`
        : `the probe stopped before reading ${step.status}; last reading ${r.last}`,
    );
  }

  private async confirm(step: Extract<PlannedStep, { kind: 'confirm' }>): Promise<string> {
    const { ctx, control, guards } = this.d;
    const answer = await this.d.confirmer.ask(step.message, {
      timeoutMs: step.timeoutMs,
      signal: control.steps.signal,
      context: () => guardSummary(guards.latest()),
    });
    this.d.emit({ type: 'confirm', at: ctx.clock.now(), message: step.message, answer });
    if (answer === 'yes') return 'confirmed';
    if (answer === 'timeout' && step.onTimeout === 'continue') return 'no answer; continuing (onTimeout: continue)';
    control.abort(
      'aborted',
      answer === 'no' ? `declined: ${step.message}` : `no answer within ${formatDuration(step.timeoutMs)}: ${step.message}`,
    );
    throw new Aborted('declined');
  }

  /** `revert: <step>`: undoes an earlier step's faults now, in the rollback order, retrying within that step's timeout. */
  private async revertStep(step: Extract<PlannedStep, { kind: 'revert' }>): Promise<string> {
    const { ledger, control } = this.d;
    const label = `${step.target.index} ${step.target.name}`;
    const faults: AppliedFault[] = ledger.outstanding().filter((f) => f.ref.step === label);
    await ledger.revertInOrder(faults, control.hard.signal, this.d.concurrency, step.target.timeoutMs);
    const failed = faults.filter((f) => !f.reverted);
    if (failed.length)
      throw new Error(`could not revert ${failed.map((f) => `${f.ref.action}${f.ref.node ? ` on ${f.ref.node}` : ''}`).join(', ')}`);
    return faults.length
      ? `reverted ${faults.length} fault(s) of step ${step.target.index}`
      : `step ${step.target.index} left nothing to revert`;
  }
}

function guardSummary(latest: { name: string; reading?: { status: string; detail: string } }[]): string {
  return latest.map((g) => `  guard ${g.name}: ${g.reading ? `${g.reading.status} — ${g.reading.detail}` : 'no reading yet'}`).join('\n');
}
