import { RunEffects } from './effects.js';
import { hostname, userInfo } from 'node:os';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { Probe } from '../contract/probe.js';
import type { Confirmer } from './confirm.js';
import { Aborted, type Outcome, RunControl } from './control.js';
import { type FaultRef, RUN_STATUS, type RunEventSink, type RunStatus } from './events.js';
import { FaultLedger } from './faults.js';
import { GuardSet } from './guards.js';
import type { Journal } from './journal.js';
import type { Plan } from './plan.js';
import { preflight } from './preflight.js';
import { consumeProbe } from './probe-stream.js';
import { Remediation } from './remediation.js';
import { rollBack, rollbackConditionHolds, revertTime } from './rollback.js';
import { StepRunner } from './steps.js';
import { agentTargets, RunAgents } from './agents.js';
import { plannedActions } from './plan.js';
import { acquireRunLock, releaseRunLock, renewRunLock, type RunLockOptions } from '../kube/run-lock.js';

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

/**
 * A run's lifecycle: preflight, the journal's run record, guards and observers, the dead-men's keepalive and
 * `maxDuration` timers, the steps, rollback always, and the end; a second interrupt stops at once.
 */
export function startRun(o: RunOptions): RunHandle {
  const { plan, emit } = o;
  const clock = o.ctx.clock;
  const concurrency = o.concurrency ?? 16;
  const control = new RunControl();
  // what the run holds applied that stops evictions, for the probes that model the controller
  const effects = new RunEffects();
  const ctx: Ctx = { ...o.ctx, signal: control.hard.signal, applied: effects };
  const ledger = new FaultLedger({ ctx, journal: o.journal, emit, faultTtlMs: plan.safety.faultTtl, remediationTtlMs: plan.safety.remediationTtl, effects });
  let journaled = false; // a refused run leaves no journal
  let interrupts = 0;
  let forced: ((r: RunResult) => void) | undefined;
  const forcedResult = new Promise<RunResult>((resolve) => (forced = resolve));
  const recoverCommand = `kube-runbook recover ${ctx.runId}`;
  // held from preflight to the end while anything is applied; outlives a dead holder by faultTtl, when its dead-men have fired
  const lock: RunLockOptions = {
    namespace: plan.safety.lockNamespace,
    runId: ctx.runId,
    where: `${safeUser()}@${hostname()} pid ${process.pid}`,
    durationMs: plan.safety.faultTtl + 60_000,
    now: () => clock.now(),
  };
  let locked = false;
  // the node agents of the nodes acted on through them: started in preflight, renewed with the keepalive, deleted at the end
  const agents = new RunAgents(
    ctx,
    agentTargets(plan.inventory, plannedActions(plan).flatMap((a) => a.targets ?? [])),
    plan.safety.faultTtl,
    // a run killed while its agents start leaves pods: journaled from then on, so `recover` deletes them
    () => journaled || journalRun(),
  );

  const guards = new GuardSet(o.guards === false ? [] : plan.guards, ctx, emit, {
    abort: (reason) => {
      if (!control.rollingBack) control.abort('aborted', reason);
    },
    remediate: (reason) => {
      void remediation.request(reason).catch(() => {});
    },
  });
  const steps = new StepRunner({ plan, ctx, emit, confirmer: o.confirmer, ledger, guards, control, concurrency });
  const remediation = new Remediation(plan.remediation, (a) => steps.applyAction(a, true, control.hard.signal), control, clock, emit);

  async function rollback(reason: string): Promise<FaultRef[]> {
    control.rollingBack = true;
    emit({ type: 'rollback-start', at: clock.now(), reason, faults: ledger.outstanding().map((f) => f.ref) });
    const wf = plan.rollback.waitFor;
    await rollBack(ledger, {
      signal: control.hard.signal,
      revertMs: revertTime(plan.safety.faultTtl),
      concurrency,
      settle: () => remediation.settled(),
      safeToUndoRemediations: async () =>
        !wf || rollbackConditionHolds(ctx, { ...wf, withinMs: plan.rollback.withinMs }, control.hard.signal, emit),
    });
    const remaining = ledger.outstanding().map((f) => f.ref);
    emit({ type: 'rollback-end', at: clock.now(), complete: remaining.length === 0, remaining });
    return remaining;
  }

  function journalRun(): void {
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
      allowContexts: plan.safety.allowContexts,
      lockNamespace: plan.safety.lockNamespace,
      faultTtlMs: plan.safety.faultTtl,
      remediationTtlMs: plan.safety.remediationTtl,
      waitFor: plan.runbook.spec.rollback.waitFor && { ...plan.runbook.spec.rollback.waitFor, withinMs: plan.rollback.withinMs },
      pid: process.pid,
      host: hostname(),
    });
  }

  /** Keeps the node-side dead-men from firing while the run lives: a touch every quarter of faultTtl (1–30 s). */
  function keepAlive(signal: AbortSignal): Promise<void> {
    const every = Math.max(1000, Math.min(plan.safety.faultTtl / 4, 30_000));
    return (async () => {
      for (;;) {
        try {
          await clock.sleep(every, signal);
        } catch {
          return;
        }
        await ledger.keepalive(signal, clock.now() + every);
        // the agents touch their nodes' keepalives when they see this renewal
        if (agents.targets.length) await agents.renew(signal).catch((e: unknown) => ctx.log.warn(`could not renew the run Lease of the node agents: ${messageOf(e)}`));
        if (locked)
          await renewRunLock(ctx.kube, lock).then(
            (held) => held || ctx.log.warn('the cluster-wide run lock expired and another run holds it now'),
            (e: unknown) => ctx.log.warn(`could not renew the cluster-wide run lock: ${messageOf(e)}`),
          );
      }
    })();
  }

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
    const pf = await preflight(plan, ctx, o.confirmer, emit, o.observers, agents);
    if (!pf.ok) return finish({ status: 'refused', reason: `preflight refused: ${pf.failures.join('; ')}` }, []);
    try {
      await acquireRunLock(ctx.kube, lock);
      locked = true;
    } catch (e) {
      emit({ type: 'preflight', at: clock.now(), check: 'run lock', ok: false, detail: messageOf(e) });
      return finish({ status: 'refused', reason: `preflight refused: run lock: ${messageOf(e)}` }, []);
    }
    if (!journaled) journalRun();
    guards.start();
    const stopObservers = new AbortController();
    const observing = (o.observers ?? []).map((ob) =>
      consumeProbe(ctx, ob.probe, ob.params, stopObservers.signal, (reading) => {
        emit({ type: 'observation', at: reading.at, name: ob.name, reading });
      }),
    );
    const stopKeepalive = new AbortController();
    control.hard.signal.addEventListener('abort', () => stopKeepalive.abort(), { once: true });
    const keeping = keepAlive(stopKeepalive.signal);
    const cancelMax = clock.setTimer(plan.safety.maxDuration, () =>
      control.abort('aborted', `spec.safety.maxDuration (${formatDuration(plan.safety.maxDuration)}) reached`),
    );
    await steps.runAll();
    cancelMax();
    const reason = control.outcome?.reason ?? 'all steps passed';
    const remaining = await rollback(reason);
    await guards.close();
    stopObservers.abort();
    await Promise.all(observing);
    stopKeepalive.abort();
    await keeping;
    return finish(control.outcome ?? { status: 'passed', reason }, remaining);
  }

  async function finish(out: Outcome, remaining: FaultRef[]): Promise<RunResult> {
    // with faults left, the lock stays until it expires (their dead-men have fired by then) or `recover` releases it
    if (locked && !remaining.length)
      await releaseRunLock(ctx.kube, lock).catch((e: unknown) => ctx.log.warn(`could not release the cluster-wide run lock (it expires by itself): ${messageOf(e)}`));
    // with faults left, the agents stay for `recover` (their dead-men fire meanwhile: the run Lease is no longer renewed)
    if (agents.started && !remaining.length)
      for (const f of await agents.stop().catch((e: unknown) => [messageOf(e)]))
        emit({ type: 'log', at: clock.now(), level: 'warn', message: `node agents not cleaned up: ${f} (kube-runbook recover ${ctx.runId} deletes them)` });
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
        emit({ type: 'log', at: clock.now(), level: 'warn', message: `${reason}: rolling back (interrupt again to stop at once)` });
        control.abort('interrupted', reason);
        return;
      }
      control.hard.abort(new Aborted('stopped at once'));
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

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
