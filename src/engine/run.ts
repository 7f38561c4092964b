import { RunEffects } from './effects.js';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Clock } from '../core/clock.js';
import type { Ctx } from '../contract/context.js';
import type { ObserverProbe } from './access.js';
import type { Confirmer } from './confirm.js';
import { Aborted, type Outcome, RunControl } from './control.js';
import { type FaultRef, RUN_STATUS, type RunEventSink, type RunStatus } from './events.js';
import { FaultLedger } from './faults.js';
import { GuardSet } from './guards.js';
import type { Journal } from '../journal/journal.js';
import { ObjectiveClocks } from './objectives.js';
import { observe } from './observers.js';
import type { Plan } from './plan.js';
import { preflight } from './preflight.js';
import { Remediation } from './remediation.js';
import { rollBack, rollbackConditionHolds, revertTime } from './rollback.js';
import { keepAlive } from './run-keepalive.js';
import { RunLockHolder } from './run-lock-holder.js';
import { RunRecord } from './run-record.js';
import { StepRunner } from './steps.js';
import { ExitWatch } from './exit-watch.js';
import { RunTasks } from './tasks.js';
import { agentTargets, RunAgents } from './agents.js';
import { watchHalt } from './halt-watch.js';
import { plannedActions } from './plan.js';

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
  observers?: ObserverProbe[];
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

/** The parts of one run that its phases share. */
interface Run {
  o: RunOptions;
  plan: Plan;
  clock: Clock;
  /** The run's own ctx: its hard signal, its effects and its tasks. */
  ctx: Ctx;
  control: RunControl;
  /** The run's events, seen by the recovery objectives' clocks before the caller's sink. */
  emit: RunEventSink;
  objectives: ObjectiveClocks;
  /** A first interrupt ends the wait for the objectives (those undecided are unmeasured), as it ends the steps. */
  measuring: AbortController;
  tasks: RunTasks;
  record: RunRecord;
  lock: RunLockHolder;
  ledger: FaultLedger;
  agents: RunAgents;
  guards: GuardSet;
  steps: StepRunner;
  remediation: Remediation;
  /** The keepalive's and the lock's renewal period. */
  everyMs: number;
  concurrency: number;
  recoverCommand: string;
}

/**
 * A run's lifecycle: preflight, the journal's run record (run-record.ts), the cluster-wide run lock
 * (run-lock-holder.ts), guards and observers (observers.ts), the dead-men's keepalive (run-keepalive.ts) and the
 * `maxDuration` timer, the steps, rollback always, and the end; a second interrupt stops at once.
 */
export function startRun(o: RunOptions): RunHandle {
  const run = assembleRun(o);
  let forced: ((r: RunResult) => void) | undefined;
  const forcedResult = new Promise<RunResult>((resolve) => (forced = resolve));
  const result = Promise.race([runToEnd(run).catch((e: unknown) => endOnEngineFault(run, e)), forcedResult]);
  let interrupts = 0;
  return {
    result,
    interrupt(reason = 'interrupted') {
      interrupts++;
      if (interrupts === 1) rollBackOnInterrupt(run, reason);
      else forced?.(stopAtOnce(run, reason));
    },
  };
}

/** The run's control, its ctx (the run's own signal, effects and tasks) and the exit watch of its in-process actions. */
function runContext(o: RunOptions): Pick<Run, 'control' | 'ctx' | 'tasks'> & { effects: RunEffects } {
  const control = new RunControl();
  // what the run holds applied that stops evictions, for the probes that model the controller
  const effects = new RunEffects();
  // what actions run in this process (a request load): stopped by their reverts, at the latest when the run ends
  const exitWatch = new ExitWatch({
    runId: o.ctx.runId,
    log: o.ctx.log,
    source: () => o.ctx.kube.source,
    ...(o.journal ? { logFile: `${o.journal.file}.exit-watch.log` } : {}),
  });
  const tasks = new RunTasks(o.ctx.log, exitWatch);
  control.hard.signal.addEventListener('abort', () => void tasks.stopAll(), { once: true });
  const ctx: Ctx = { ...o.ctx, signal: control.hard.signal, applied: effects, tasks };
  return { control, ctx, tasks, effects };
}

/** Builds every part of the run; nothing starts yet. */
function assembleRun(o: RunOptions): Run {
  const { plan } = o;
  const clock = o.ctx.clock;
  const concurrency = o.concurrency ?? 16;
  const { control, ctx, tasks, effects } = runContext(o);
  // the keepalive's and the lock's renewal period: a quarter of faultTtl, 1–30 s
  const everyMs = Math.max(1000, Math.min(plan.safety.faultTtl / 4, 30_000));
  // the recovery objectives' clocks start on the run's own events (a step's start, a fault's revert)
  const objectives = new ObjectiveClocks(plan.objectives, ctx, o.emit);
  const emit: RunEventSink = (e) => {
    objectives.onEvent(e);
    o.emit(e);
  };
  const record = new RunRecord({ ctx, plan, journal: o.journal, inventoryFile: o.inventoryFile, kubeconfig: o.kubeconfig });
  const lock = new RunLockHolder({ ctx, safety: plan.safety, everyMs, emit, control });
  const ledger = new FaultLedger({
    ctx,
    journal: o.journal,
    emit,
    faultTtlMs: plan.safety.faultTtl,
    remediationTtlMs: plan.safety.remediationTtl,
    // the maxDuration timer starts a little later (after preflight): the faultTtl that faults add to this covers that
    runEndsBy: clock.now() + plan.safety.maxDuration,
    effects,
    beforeApply: (action, remediation) => (remediation ? lock.outlastRemediation(action) : Promise.resolve()),
  });
  // the node agents of the nodes acted on through them: started in preflight, renewed with the keepalive, deleted at the end
  const agents = new RunAgents(
    ctx,
    agentTargets(
      plan.inventory,
      plannedActions(plan).flatMap((a) => a.targets ?? []),
    ),
    plan.safety.faultTtl,
    // a run killed while its agents start leaves pods: journaled from then on, so `recover` deletes them
    () => record.begin(),
    plan.safety.lockNamespace,
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
  const recoverCommand = `kube-runbook recover ${ctx.runId}`;
  const measuring = new AbortController();
  return {
    o,
    plan,
    clock,
    ctx,
    control,
    emit,
    objectives,
    measuring,
    tasks,
    record,
    lock,
    ledger,
    agents,
    guards,
    steps,
    remediation,
    everyMs,
    concurrency,
    recoverCommand,
  };
}

/** Preflight, the lock, the steps under guards and observers, rollback, the objectives' verdict, the end. */
async function runToEnd(run: Run): Promise<RunResult> {
  const { o, plan, ctx, clock, control, emit } = run;
  emit({
    type: 'run-start',
    at: clock.now(),
    runId: ctx.runId,
    runbook: plan.runbook.metadata.name,
    context: ctx.kube.contextName,
    dryRun: false,
    journal: o.journal?.file ?? '',
  });
  const pf = await preflight(plan, ctx, o.confirmer, emit, o.observers, run.agents);
  if (!pf.ok) return finish(run, { status: 'refused', reason: `preflight refused: ${pf.failures.join('; ')}` }, []);
  try {
    await run.lock.acquire();
  } catch (e) {
    emit({ type: 'preflight', at: clock.now(), check: 'run lock', ok: false, detail: messageOf(e) });
    return finish(run, { status: 'refused', reason: `preflight refused: run lock: ${messageOf(e)}` }, []);
  }
  run.record.begin();
  run.guards.start();
  run.objectives.start();
  const observers = observe(ctx, o.observers ?? [], emit);
  const stopHolding = holdWhileRunning(run);
  const cancelMax = clock.setTimer(plan.safety.maxDuration, () =>
    control.abort('aborted', `spec.safety.maxDuration (${formatDuration(plan.safety.maxDuration)}) reached`),
  );
  await run.steps.runAll();
  cancelMax();
  const reason = control.outcome?.reason ?? 'all steps passed';
  const remaining = await rollback(run, reason);
  await run.objectives.settle(clock.now(), AbortSignal.any([run.measuring.signal, control.hard.signal]));
  const missed = run.objectives.missed;
  await run.guards.close();
  await observers.stop();
  await stopHolding();
  const outcome: Outcome = missed.length
    ? { status: 'objective-missed', reason: `recovery objective${missed.length > 1 ? 's' : ''} missed: ${missed.join(', ')}` }
    : { status: 'passed', reason };
  return finish(run, control.outcome ?? outcome, remaining);
}

/** Starts the dead-men's keepalive, the lock's renewal and the halt watch; the function returned stops them. */
function holdWhileRunning(run: Run): () => Promise<void> {
  const { ctx, clock, control, emit } = run;
  const stop = new AbortController();
  control.hard.signal.addEventListener('abort', () => stop.abort(), { once: true });
  const keeping = keepAlive({ ctx, ledger: run.ledger, agents: run.agents, everyMs: run.everyMs, emit }, stop.signal);
  const holding = run.lock.hold(stop.signal);
  const halting = watchHalt(ctx, {
    lockNamespace: run.plan.safety.lockNamespace,
    signal: stop.signal,
    onHalt: (_, text) => {
      emit({ type: 'log', at: clock.now(), level: 'error', message: `HALTED: ${text}${control.rollingBack ? '' : '; rolling back'}` });
      if (!control.rollingBack) control.abort('halted', `HALTED: ${text}`);
    },
  });
  return async () => {
    stop.abort();
    await keeping;
    await holding;
    await halting;
  };
}

/** Reverts every fault left (remediations once the rollback condition holds); returns those that remain. */
async function rollback(run: Run, reason: string): Promise<FaultRef[]> {
  const { plan, ctx, clock, control, emit, ledger } = run;
  control.rollingBack = true;
  emit({ type: 'rollback-start', at: clock.now(), reason, faults: ledger.outstanding().map((f) => f.ref) });
  const wf = plan.rollback.waitFor;
  await rollBack(ledger, {
    signal: control.hard.signal,
    revertMs: revertTime(plan.safety.faultTtl),
    concurrency: run.concurrency,
    settle: () => run.remediation.settled(),
    safeToUndoRemediations: async () =>
      !wf || rollbackConditionHolds(ctx, { ...wf, withinMs: plan.rollback.withinMs }, control.hard.signal, emit),
  });
  const remaining = ledger.outstanding().map((f) => f.ref);
  emit({ type: 'rollback-end', at: clock.now(), complete: remaining.length === 0, remaining });
  return remaining;
}

/** An engine fault: still roll back what was applied. */
function endOnEngineFault(run: Run, e: unknown): Promise<RunResult> {
  const reason = `internal error: ${messageOf(e)}`;
  return rollback(run, reason).then(
    (remaining) => finish(run, { status: 'failed', reason }, remaining),
    () =>
      finish(
        run,
        { status: 'failed', reason },
        run.ledger.outstanding().map((f) => f.ref),
      ),
  );
}

/** Stops the tasks, releases the lock and the node agents, closes the record and the journal, says `run-end`. */
async function finish(run: Run, out: Outcome, remaining: FaultRef[]): Promise<RunResult> {
  const { ctx, clock, emit, agents, recoverCommand } = run;
  await run.tasks.stopAll();
  await run.lock.end(remaining.length ? run.ledger.outstanding() : [], recoverCommand);
  // with faults left too: the dead-men revert them without the agents (the run Lease is deleted, so no keepalive
  // comes), and `recover` starts agents of its own; nothing privileged of this run stays on the nodes
  if (agents.started)
    for (const f of await agents.stop().catch((e: unknown) => [messageOf(e)]))
      emit({
        type: 'log',
        at: clock.now(),
        level: 'warn',
        message: `node agents not cleaned up: ${f} (kube-runbook recover ${ctx.runId} deletes them)`,
      });
  const status: RunStatus = remaining.length ? 'rollback-incomplete' : out.status;
  run.record.end(status);
  const result: RunResult = {
    status,
    exitCode: RUN_STATUS[status],
    reason: out.reason,
    remaining,
    recoverCommand: remaining.length ? recoverCommand : undefined,
  };
  emit({ type: 'run-end', at: clock.now(), status, reason: out.reason, remaining, recoverCommand: result.recoverCommand });
  run.o.journal?.close();
  return result;
}

/** A first interrupt: the steps and the objectives' wait end, and the run rolls back. */
function rollBackOnInterrupt(run: Run, reason: string): void {
  run.emit({ type: 'log', at: run.clock.now(), level: 'warn', message: `${reason}: rolling back (interrupt again to stop at once)` });
  run.control.abort('interrupted', reason);
  run.measuring.abort();
}

/** A second interrupt: stops at once and ends the run with what remains applied, left to `recover`. */
function stopAtOnce(run: Run, reason: string): RunResult {
  run.control.hard.abort(new Aborted('stopped at once'));
  const remaining = run.ledger.outstanding().map((f) => f.ref);
  const status: RunStatus = remaining.length ? 'rollback-incomplete' : 'interrupted';
  const r: RunResult = {
    status,
    exitCode: RUN_STATUS[status],
    reason: `${reason} twice: stopped at once`,
    remaining,
    recoverCommand: remaining.length ? run.recoverCommand : undefined,
    forced: true,
  };
  run.emit({ type: 'run-end', at: run.clock.now(), status, reason: r.reason, remaining, recoverCommand: r.recoverCommand });
  return r;
}
