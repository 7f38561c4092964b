import { RunEffects } from './effects.js';
import { hostname, userInfo } from 'node:os';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { Probe } from '../contract/probe.js';
import type { Confirmer } from './confirm.js';
import { Aborted, type Outcome, RunControl } from './control.js';
import { type Attempt, type FaultRef, RUN_STATUS, type RunEventSink, type RunStatus } from './events.js';
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
import { acquireRunLock, releaseRunLock, renewRunLock, RUN_LOCK_NAME, type RunLockOptions, type RunLockState } from '../kube/run-lock.js';
import type { Action } from '../contract/action.js';
import type { AppliedFault } from './faults.js';
import { withRetries } from './retry.js';

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
  const ledger = new FaultLedger({
    ctx,
    journal: o.journal,
    emit,
    faultTtlMs: plan.safety.faultTtl,
    remediationTtlMs: plan.safety.remediationTtl,
    effects,
    beforeApply: (action, remediation) => holdLockFor(action, remediation),
  });
  let journaled = false; // a refused run leaves no journal
  let interrupts = 0;
  let forced: ((r: RunResult) => void) | undefined;
  const forcedResult = new Promise<RunResult>((resolve) => (forced = resolve));
  const recoverCommand = `kube-runbook recover ${ctx.runId}`;
  // the keepalive's and the lock's renewal period: a quarter of faultTtl, 1–30 s
  const every = Math.max(1000, Math.min(plan.safety.faultTtl / 4, 30_000));
  // Held from preflight to the end, and past it while anything is left applied: it outlives a dead holder until
  // every dead-man of what it applied has fired (faultTtl, or remediationTtl and the node-side wait of a remediation)
  let outlast = plan.safety.faultTtl;
  const lock = (state: RunLockState = 'running', durationMs = outlast + LOCK_MARGIN_MS): RunLockOptions => ({
    namespace: plan.safety.lockNamespace,
    runId: ctx.runId,
    where: `${safeUser()}@${hostname()} pid ${process.pid}`,
    durationMs,
    now: () => clock.now(),
    state,
    renewEveryMs: every,
  });
  let locked = false;
  let lockRenewed = 0;
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

  /** Retries of what the run renews, each until `deadline`, reported as attempts. */
  const renewing = (signal: AbortSignal, deadline: number) => ({
    clock,
    signal,
    deadline,
    safeToRepeat: true,
    record: (a: Attempt) => emit({ type: 'attempt', at: clock.now(), ...a }),
  });

  /** Keeps the node-side dead-men from firing while the run lives: a touch every quarter of faultTtl (1–30 s). */
  function keepAlive(signal: AbortSignal): Promise<void> {
    return (async () => {
      for (;;) {
        try {
          await clock.sleep(every, signal);
        } catch {
          return;
        }
        await ledger.keepalive(signal, clock.now() + every);
        // the agents touch their nodes' keepalives when they see this renewal (tried again until the next one)
        if (agents.targets.length)
          await withRetries('agents', () => agents.renew(signal), renewing(signal, clock.now() + every)).catch((e: unknown) =>
            ctx.log.warn(`could not renew the run Lease of the node agents: ${messageOf(e)}`),
          );
      }
    })();
  }

  /** Renews the run lock, tried again until it would expire; false once it is lost (another run holds it, or it expired). */
  async function renewLock(signal: AbortSignal, state: RunLockState = 'running', durationMs?: number): Promise<boolean> {
    const expires = lockRenewed + outlast + LOCK_MARGIN_MS;
    try {
      const held = await withRetries('lock', () => renewRunLock(ctx.kube, lock(state, durationMs)), renewing(signal, expires));
      if (held) lockRenewed = clock.now();
      else lostLock('another run holds it now (it expired, or was released)');
      return held;
    } catch (e) {
      if (signal.aborted) return true;
      if (clock.now() < expires) {
        ctx.log.warn(`could not renew the cluster-wide run lock (${messageOf(e)}); trying again`);
        return true;
      }
      lostLock(`it could not be renewed before it expired: ${messageOf(e)}`);
      return false;
    }
  }

  function lostLock(why: string): void {
    if (!locked) return;
    locked = false;
    const message = `lost the cluster-wide run lock (Lease ${plan.safety.lockNamespace}/${RUN_LOCK_NAME}): ${why}`;
    emit({ type: 'log', at: clock.now(), level: 'error', message: `${message}${control.rollingBack ? '' : '; rolling back'}` });
    if (!control.rollingBack) control.abort('aborted', message);
  }

  /** Holds the run lock while the run lives: renewed every quarter of faultTtl (1–30 s), on a loop of its own. */
  function holdLock(signal: AbortSignal): Promise<void> {
    return (async () => {
      while (locked) {
        try {
          await clock.sleep(every, signal);
        } catch {
          return;
        }
        if (!(await renewLock(signal))) return;
      }
    })();
  }

  /**
   * Before a remediation (or protective step) is applied: the lock must outlast its dead-man (remediationTtl) and
   * its node-side wait, should the executor die now; renewed so at once, or the apply does not happen.
   */
  async function holdLockFor(action: Action, remediation: boolean): Promise<void> {
    if (!remediation) return;
    const need = (plan.safety.remediationTtl ?? plan.safety.faultTtl) + (action.meta.nodeSideWaitMs ?? 0);
    if (need <= outlast) return;
    outlast = need;
    if (locked && !(await renewLock(control.hard.signal)))
      throw new Error('the cluster-wide run lock could not be made to outlast the remediation; not applied');
  }

  /** How long the lock must outlast the run for what it leaves applied: until each dead-man has fired. */
  function leftFor(remaining: AppliedFault[]): number {
    const ttl = (f: AppliedFault) => (f.ref.remediation ? (plan.safety.remediationTtl ?? plan.safety.faultTtl) + (f.action.meta.nodeSideWaitMs ?? 0) : plan.safety.faultTtl);
    return Math.max(...remaining.map(ttl)) + LOCK_MARGIN_MS;
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
      await acquireRunLock(ctx.kube, lock());
      locked = true;
      lockRenewed = clock.now();
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
    const holding = holdLock(stopKeepalive.signal);
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
    await holding;
    return finish(control.outcome ?? { status: 'passed', reason }, remaining);
  }

  async function finish(out: Outcome, remaining: FaultRef[]): Promise<RunResult> {
    // with something left, the lock stays, no longer renewed, until each dead-man of it has fired (or `recover`
    // releases it): a second run cannot start while a remediation of this one is still applied
    if (locked && !remaining.length)
      await releaseRunLock(ctx.kube, lock()).catch((e: unknown) => ctx.log.warn(`could not release the cluster-wide run lock (it expires by itself): ${messageOf(e)}`));
    if (locked && remaining.length) {
      const left = ledger.outstanding();
      const ms = leftFor(left);
      const held = await renewLock(new AbortController().signal, 'left', ms);
      if (held)
        emit({
          type: 'log',
          at: clock.now(),
          level: 'warn',
          message:
            `the cluster-wide run lock stays held for ${formatDuration(ms)}, until the node-side timers of what is left have undone it; ` +
            `${recoverCommand} undoes it and releases the lock`,
        });
    }
    // with faults left too: the dead-men revert them without the agents (the run Lease is deleted, so no keepalive
    // comes), and `recover` starts agents of its own; nothing privileged of this run stays on the nodes
    if (agents.started)
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

/** How much longer than the dead-men it covers the lock lasts after its last renewal. */
const LOCK_MARGIN_MS = 60_000;

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
