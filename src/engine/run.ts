import { hostname } from 'node:os';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Confirmer } from './confirm.js';
import type { Ctx } from '../contract/context.js';
import { type FaultRef, RUN_STATUS, type RunEventSink, type RunStatus, type StepStatus } from './events.js';
import { type AppliedFault, eachLimited, FaultLedger } from './faults.js';
import { GuardSet } from './guards.js';
import type { Journal } from './journal.js';
import { type Plan, type PlannedAction, type PlannedStep, stepActions } from './plan.js';
import { preflight } from './preflight.js';
import type { Probe } from '../contract/probe.js';
import { consumeProbe, waitForReading } from './probe-stream.js';

export interface RunOptions {
  plan: Plan;
  /** ctx.signal is not used for the run; the run has its own (see RunHandle). */
  ctx: Ctx;
  journal: Journal | null;
  emit: RunEventSink;
  confirmer: Confirmer;
  /** Recorded in the journal so `recover` can reach the cluster and the nodes again. */
  inventoryFile: string;
  kubeconfig?: string;
  /** `--no-guards`: guards are not started (to show what happens without them). */
  guards?: boolean;
  /** How many targets of one step are changed at once. */
  concurrency?: number;
  /** Probes watched for the report only (never guards), from preflight to the end of rollback, e.g. pod deletions. */
  observers?: { name: string; probe: Probe; params: Record<string, unknown> }[];
}

export interface RunResult {
  status: RunStatus;
  exitCode: number;
  reason: string;
  remaining: FaultRef[];
  recoverCommand?: string;
  /** Stopped at once by a second interrupt, with work possibly still in flight. */
  forced?: boolean;
}

/** A run in progress: `interrupt` once rolls back; twice stops at once, leaving what remains to `recover`. */
export interface RunHandle {
  result: Promise<RunResult>;
  interrupt(reason?: string): void;
}

type Outcome = { status: RunStatus; reason: string };

class Aborted extends Error {}

export function startRun(o: RunOptions): RunHandle {
  const { plan, emit } = o;
  const ctx0 = o.ctx;
  const clock = ctx0.clock;
  const stepsAbort = new AbortController(); // stops steps; rollback still runs
  const hardAbort = new AbortController(); // stops everything
  const ctx: Ctx = { ...ctx0, signal: hardAbort.signal };
  const ledger = new FaultLedger({ ctx, journal: o.journal, emit, faultTtlMs: plan.safety.faultTtl });
  let outcome: Outcome | undefined;
  let anyFaultApplied = false;
  let journaled = false; // a refused run leaves no journal
  let remediated: Promise<void> | undefined;
  let rollingBack = false;
  let interrupts = 0;
  let forced: ((r: RunResult) => void) | undefined;
  const forcedResult = new Promise<RunResult>((resolve) => (forced = resolve));

  const log = (level: 'info' | 'warn' | 'error', message: string) => emit({ type: 'log', at: clock.now(), level, message });

  /** First reason wins: the run ends for one reason. */
  const abort = (status: RunStatus, reason: string) => {
    if (!outcome) outcome = { status, reason };
    stepsAbort.abort(new Aborted(reason));
  };

  const guards = new GuardSet(o.guards === false ? [] : plan.guards, ctx, emit, {
    abort: (reason) => {
      if (!rollingBack) abort('aborted', reason);
    },
    remediate: (reason) => {
      void remediate(reason).catch(() => {});
    },
  });

  const remediate = (reason: string): Promise<void> => {
    if (remediated) return remediated;
    if (!plan.remediation.length) {
      log('warn', `${reason}; the runbook has no remediation, aborting instead`);
      if (!rollingBack) abort('aborted', reason);
      return (remediated = Promise.resolve());
    }
    emit({ type: 'remediation', at: clock.now(), phase: 'start', detail: reason });
    remediated = (async () => {
      try {
        for (const r of plan.remediation) await applyAction(r, true, hardAbort.signal);
        emit({ type: 'remediation', at: clock.now(), phase: 'end', detail: 'remediation applied' });
      } catch (e) {
        emit({ type: 'remediation', at: clock.now(), phase: 'end', detail: `remediation failed: ${messageOf(e)}` });
        if (!rollingBack) abort('aborted', `${reason}; remediation failed: ${messageOf(e)}`);
        throw e;
      }
    })();
    return remediated;
  };

  async function applyAction(a: PlannedAction, remediation: boolean, signal: AbortSignal): Promise<void> {
    await ledger.serial(async () => {
      if (signal.aborted) throw new Aborted('stopped before applying');
      guards.arm();
      anyFaultApplied = true;
      const targets = a.targets ?? [undefined];
      await eachLimited(targets, o.concurrency ?? 16, async (node) => {
        await ledger.apply(a.action, a.params, node, `${a.index} ${a.name}`, remediation, signal);
      });
    });
  }

  async function withTimeout<T>(ms: number, what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const local = new AbortController();
    const onAbort = () => local.abort(stepsAbort.signal.reason);
    stepsAbort.signal.addEventListener('abort', onAbort, { once: true });
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
      stepsAbort.signal.removeEventListener('abort', onAbort);
    }
  }

  async function expect(step: Extract<PlannedStep, { kind: 'expect' }>): Promise<string> {
    const r = await waitForReading(ctx, step.probe, step.params, step.status, step.withinMs, stepsAbort.signal);
    if (r.met) return r.last;
    if (stepsAbort.signal.aborted) throw new Aborted(outcome?.reason ?? 'aborted');
    throw new Error(
      r.timedOut
        ? `did not read ${step.status} within ${formatDuration(step.withinMs)}; last reading ${r.last}`
        : `the probe stopped before reading ${step.status}; last reading ${r.last}`,
    );
  }

  async function runStep(step: PlannedStep): Promise<string> {
    switch (step.kind) {
      case 'action':
        await withTimeout(step.timeoutMs, `step "${step.name}"`, (signal) => applyAction(step, step.revertLast, signal));
        return step.targets ? `applied on ${step.targets.map((t) => t.name).join(', ')}` : 'applied';
      case 'expect':
        return expect(step);
      case 'wait':
        await clock.sleep(step.ms, stepsAbort.signal);
        return `waited ${formatDuration(step.ms)}`;
      case 'confirm': {
        const answer = await o.confirmer.ask(step.message, {
          timeoutMs: step.timeoutMs,
          signal: stepsAbort.signal,
          context: () => guardSummary(guards.latest()),
        });
        emit({ type: 'confirm', at: clock.now(), message: step.message, answer });
        if (answer === 'yes') return 'confirmed';
        if (answer === 'timeout' && step.onTimeout === 'continue') return 'no answer; continuing (onTimeout: continue)';
        abort('aborted', answer === 'no' ? `declined: ${step.message}` : `no answer within ${formatDuration(step.timeoutMs)}: ${step.message}`);
        throw new Aborted('declined');
      }
      case 'revert': {
        const label = `${step.target.index} ${step.target.name}`;
        const faults = ledger.outstanding().filter((f) => f.ref.step === label);
        await revertAll(faults);
        const failed = faults.filter((f) => !f.reverted);
        if (failed.length) throw new Error(`could not revert ${failed.map((f) => `${f.ref.action}${f.ref.node ? ` on ${f.ref.node}` : ''}`).join(', ')}`);
        return faults.length ? `reverted ${faults.length} fault(s) of step ${step.target.index}` : `step ${step.target.index} left nothing to revert`;
      }
      case 'parallel': {
        // the first child to fail stops its siblings (through the run's abort) and fails the group
        await Promise.all(
          step.children.map((c) =>
            runTracked(c).catch((e: unknown) => {
              if (!stepsAbort.signal.aborted) abort(anyFaultApplied ? 'failed' : 'refused', `step ${c.index} "${c.name}" failed: ${messageOf(e)}`);
              throw e;
            }),
          ),
        );
        return `${step.children.length} steps`;
      }
    }
  }

  async function runTracked(step: PlannedStep): Promise<void> {
    // Guards react from the first step that is not a steady-state check: the first fault, or, in a runbook that
    // only observes, its first wait or confirmation.
    if (step.kind !== 'expect') guards.arm();
    emit({ type: 'step-start', at: clock.now(), index: step.index, name: step.name, kind: step.kind });
    try {
      const detail = await runStep(step);
      emit({ type: 'step-end', at: clock.now(), index: step.index, name: step.name, kind: step.kind, status: 'passed', detail });
    } catch (e) {
      const aborted = stepsAbort.signal.aborted;
      const status: StepStatus = aborted ? 'aborted' : 'failed';
      const detail = aborted ? outcome?.reason ?? messageOf(e) : messageOf(e);
      emit({ type: 'step-end', at: clock.now(), index: step.index, name: step.name, kind: step.kind, status, detail });
      throw e;
    }
  }

  async function waitForGuards(): Promise<void> {
    const holding = guards.holdingGuards();
    if (!holding.length) return;
    log('info', `waiting for guards that cannot see yet: ${holding.join(', ')}`);
    const bound = Math.max(...plan.guards.filter((g) => holding.includes(g.name)).map((g) => g.unknownForMs));
    await withTimeout(bound, 'guards', (signal) => guards.clear(signal)).catch((e: unknown) => {
      if (stepsAbort.signal.aborted) throw e;
      throw new Error(`guards still cannot see after ${formatDuration(bound)}: ${guards.holdingGuards().join(', ')}`);
    });
  }

  async function runSteps(): Promise<void> {
    for (const step of plan.steps) {
      if (stepsAbort.signal.aborted) break;
      try {
        await waitForGuards();
        await runTracked(step);
      } catch (e) {
        if (stepsAbort.signal.aborted) break;
        const noFault = !anyFaultApplied && stepActions(plan.steps).length > 0;
        abort(noFault ? 'refused' : 'failed', noFault ? `nothing applied: step ${step.index} "${step.name}" failed: ${messageOf(e)}` : `step ${step.index} "${step.name}" failed: ${messageOf(e)}`);
        break;
      }
    }
  }

  const revertAll = async (faults: AppliedFault[]) => {
    await ledger.revertInOrder(faults, hardAbort.signal, o.concurrency ?? 16);
  };

  async function waitForRollbackCondition(): Promise<boolean> {
    const wf = plan.rollback.waitFor;
    if (!wf) return true;
    emit({ type: 'rollback-wait', at: clock.now(), phase: 'start', detail: `waiting for ${wf.probeId} to read ok before undoing remediation` });
    const { met: ok, last } = await waitForReading(ctx, wf.probe, wf.params, 'ok', plan.rollback.withinMs, hardAbort.signal);
    emit({
      type: 'rollback-wait',
      at: clock.now(),
      phase: ok ? 'ok' : 'timeout',
      detail: ok ? last : `not ok within ${formatDuration(plan.rollback.withinMs)} (last reading ${last}); remediation left in place`,
    });
    return ok;
  }

  async function rollback(reason: string): Promise<FaultRef[]> {
    rollingBack = true;
    const faults = ledger.outstanding();
    emit({ type: 'rollback-start', at: clock.now(), reason, faults: faults.map((f) => f.ref) });
    await revertAll(faults.filter((f) => !f.ref.remediation));
    // Remediations last, and only once the cluster is healthy again (restarting the controller-manager while
    // leases are stale is the cascade). A guard may still ask for remediation meanwhile: a second round undoes it.
    for (let round = 0; round < 2; round++) {
      await remediated?.catch(() => {});
      const remediations = ledger.outstanding().filter((f) => f.ref.remediation);
      if (!remediations.length || !(await waitForRollbackCondition())) break;
      await revertAll(remediations);
    }
    const remaining = ledger.outstanding().map((f) => f.ref);
    emit({ type: 'rollback-end', at: clock.now(), complete: remaining.length === 0, remaining });
    return remaining;
  }

  const recoverCommand = `kube-runbook recover ${ctx.runId}`;

  async function main(): Promise<RunResult> {
    emit({
      type: 'run-start',
      at: clock.now(),
      runId: ctx.runId,
      runbook: plan.runbook.metadata.name,
      context: ctx.kube.contextName,
      dryRun: false,
      journal: o.journal?.file ?? '',
    });
    const pf = await preflight(plan, ctx, o.confirmer, emit);
    if (!pf.ok) return finish({ status: 'refused', reason: `preflight refused: ${pf.failures.join('; ')}` }, []);
    journaled = true;
    o.journal?.append({
      type: 'run',
      at: clock.now(),
      runId: ctx.runId,
      runbookFile: plan.file,
      runbookName: plan.runbook.metadata.name,
      inventoryFile: o.inventoryFile,
      inventory: plan.inventory,
      kubeconfig: o.kubeconfig,
      context: ctx.kube.contextName,
      faultTtlMs: plan.safety.faultTtl,
      waitFor: plan.runbook.spec.rollback.waitFor && { ...plan.runbook.spec.rollback.waitFor, withinMs: plan.rollback.withinMs },
      pid: process.pid,
      host: hostname(),
    });
    guards.start();
    const stopObservers = new AbortController();
    const observing = (o.observers ?? []).map((ob) =>
      consumeProbe(ctx, ob.probe, ob.params, stopObservers.signal, (reading) => {
        emit({ type: 'observation', at: reading.at, name: ob.name, reading });
      }),
    );
    const keepEvery = Math.max(1000, Math.min(plan.safety.faultTtl / 4, 30_000));
    const stopKeepalive = new AbortController();
    hardAbort.signal.addEventListener('abort', () => stopKeepalive.abort(), { once: true });
    const keeping = (async () => {
      for (;;) {
        try {
          await clock.sleep(keepEvery, stopKeepalive.signal);
        } catch {
          return;
        }
        await ledger.keepalive(stopKeepalive.signal);
      }
    })();
    const cancelMax = clock.setTimer(plan.safety.maxDuration, () =>
      abort('aborted', `spec.safety.maxDuration (${formatDuration(plan.safety.maxDuration)}) reached`),
    );
    await runSteps();
    cancelMax();
    const reason = outcome?.reason ?? 'all steps passed';
    const remaining = await rollback(reason);
    await guards.close();
    stopObservers.abort();
    await Promise.all(observing);
    stopKeepalive.abort();
    await keeping;
    return finish(outcome ?? { status: 'passed', reason }, remaining);
  }

  function finish(out: Outcome, remaining: FaultRef[]): RunResult {
    const status: RunStatus = remaining.length ? 'rollback-incomplete' : out.status;
    if (journaled) o.journal?.append({ type: 'end', at: clock.now(), status });
    const result: RunResult = {
      status,
      exitCode: RUN_STATUS[status],
      reason: out.reason,
      remaining,
      recoverCommand: remaining.length ? recoverCommand : undefined,
    };
    emit({ type: 'run-end', at: clock.now(), status, reason: out.reason, remaining, recoverCommand: result.recoverCommand });
    o.journal?.close();
    return result;
  }

  const result = Promise.race([
    main().catch((e: unknown) => {
      // an engine fault: still roll back what was applied
      const reason = `internal error: ${messageOf(e)}`;
      return rollback(reason).then(
        (remaining) => finish({ status: 'failed', reason }, remaining),
        () => finish({ status: 'failed', reason }, ledger.outstanding().map((f) => f.ref)),
      );
    }),
    forcedResult,
  ]);

  return {
    result,
    interrupt(reason = 'interrupted') {
      interrupts++;
      if (interrupts === 1) {
        log('warn', `${reason}: rolling back (interrupt again to stop at once)`);
        abort('interrupted', reason);
        return;
      }
      hardAbort.abort(new Aborted('stopped at once'));
      const remaining = ledger.outstanding().map((f) => f.ref);
      const status: RunStatus = remaining.length ? 'rollback-incomplete' : 'interrupted';
      const r: RunResult = {
        status,
        exitCode: RUN_STATUS[status],
        reason: `${reason} twice: stopped at once`,
        remaining,
        recoverCommand: remaining.length ? recoverCommand : undefined,
        forced: true,
      };
      emit({ type: 'run-end', at: clock.now(), status, reason: r.reason, remaining, recoverCommand: r.recoverCommand });
      forced?.(r);
    },
  };
}

function guardSummary(latest: { name: string; reading?: { status: string; detail: string } }[]): string {
  return latest.map((g) => `  guard ${g.name}: ${g.reading ? `${g.reading.status} — ${g.reading.detail}` : 'no reading yet'}`).join('\n');
}
