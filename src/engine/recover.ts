import { hostname, userInfo } from 'node:os';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import {
  acquireRunLock,
  currentRunLockHolder,
  describeHolder,
  holderLive,
  releaseRunLock,
  renewRunLock,
  type RunLockHolder,
  type RunLockOptions,
  type RunLockState,
} from './run-lock-lease.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { FaultRef, RunEventSink } from './events.js';
import { type AppliedFault, FaultLedger } from './faults.js';
import { Journal, type JournalView, outstanding } from '../journal/journal.js';
import { contextAllowed } from './contexts.js';
import { rollBack, rollbackConditionHolds, revertTime } from './rollback.js';
import type { Registry } from '../contract/registry.js';
import { agentTargets, RunAgents } from './agents.js';

export interface RecoverResult {
  runId: string;
  reverted: FaultRef[];
  remaining: FaultRef[];
  errors: string[];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** When the lock cannot be read: whether the run's own process still runs on this machine. */
function runStillActive(view: JournalView): boolean {
  return view.status === undefined && view.run.host === hostname() && view.run.pid !== process.pid && alive(view.run.pid);
}

/** How often `recover` renews the lock it holds. */
const RECOVER_RENEW_MS = 30_000;
const LOCK_MARGIN_MS = 60_000;

/**
 * Whether the run is still live, by the holder of the cluster-wide run lock rather than by the machine it started
 * on: a lock held for this run and renewed lately (by its executor, or by another `recover`) is a live process,
 * wherever it runs; one whose renewals stopped (killed, its machine gone) or that the run left is not. Another run
 * that holds the lock and lives refuses the recover too. When the lock cannot be read (the apiserver is down, which a
 * fault may have done), the journal's host and pid decide as before. `force` skips all of it.
 */
async function checkLive(view: JournalView, o: { ctx: Ctx; force?: boolean }): Promise<RunLockHolder | undefined | 'unreadable'> {
  const ns = view.run.lockNamespace;
  const now = o.ctx.clock.now();
  const holder = ns
    ? await currentRunLockHolder(o.ctx.kube, { namespace: ns, now: () => now }).catch((e: unknown) => {
        o.ctx.log.warn(`cannot read the cluster-wide run lock (${messageOf(e)}): telling a live run by its pid on this machine`);
        return 'unreadable' as const;
      })
    : 'unreadable';
  if (o.force) return holder;
  const runId = view.run.runId;
  if (holder === 'unreadable') {
    if (runStillActive(view))
      throw new KrError(
        'RUN_STILL_ACTIVE',
        `run ${runId} is still in progress (pid ${view.run.pid}); interrupt it (Ctrl-C) to roll back, or pass --force`,
        { exit: 2 },
      );
    return holder;
  }
  if (holder && holderLive(holder, now) && holder.runId === runId)
    throw new KrError(
      'RUN_STILL_ACTIVE',
      `run ${runId} is still in progress: ${holder.state === 'recovering' ? 'a recover of it' : 'its executor'} (${holder.where}) renewed the cluster-wide run lock at ${holder.renewed}; ` +
        'interrupt it (Ctrl-C) to roll back, or pass --force',
      { exit: 2 },
    );
  if (holder && holderLive(holder, now))
    throw new KrError('RUN_LOCKED', `${describeHolder(ns!, holder)}; recovering ${runId} meanwhile needs --force`, { exit: EXIT.refused });
  return holder;
}

/**
 * Reverts, from the journal alone, every fault of a run that was prepared and not reverted: faults in reverse order,
 * then remediations — after the run's rollback condition holds, unless `force`. Works in a new process: the state
 * each action needs is in the journal, and the inventory snapshot says how to reach the nodes.
 */
export async function recoverRun(
  view: JournalView,
  o: { ctx: Ctx; registry: Registry; emit: RunEventSink; force?: boolean; journal?: Journal },
): Promise<RecoverResult> {
  const allow = view.run.allowContexts;
  const context = o.ctx.kube.contextName;
  if (allow && !contextAllowed(context, o.ctx.kube.server, allow))
    throw new KrError(
      'CONTEXT_NOT_ALLOWED',
      `run ${view.run.runId}: context "${context}" is not in its runbook's spec.safety.allowContexts (${allow.join(', ') || 'none listed'}); nothing was touched`,
      { exit: EXIT.refused },
    );
  const holder = await checkLive(view, o);
  // the run's journal, with its in-cluster copy when it was taken from there (what recover reverts goes there too)
  const journal = o.journal ?? new Journal(view.file);
  const ledger = new FaultLedger({
    ctx: o.ctx,
    journal,
    emit: o.emit,
    faultTtlMs: view.run.faultTtlMs,
    remediationTtlMs: view.run.remediationTtlMs,
    by: 'recover',
  });
  const todo = outstanding(view);
  const adopted: AppliedFault[] = [];
  for (const f of todo) {
    const p = f.prepared;
    adopted.push({
      ref: { faultId: p.faultId, action: p.action, node: p.node, step: p.step, remediation: p.remediation },
      action: await o.registry.action(p.action),
      node: p.node ? o.ctx.inventory.spec.nodes.find((n) => n.name === p.node) : undefined,
      state: f.state,
      deadman: p.deadman,
      reverted: false,
    });
  }
  ledger.adopt(adopted);
  // the lock, taken for the run (its holder identity) while recover works, and past it for what it leaves applied
  const lock = await takeLock(view, o.ctx, holder, adopted);
  const errors: string[] = [];
  const missing = adopted.filter((f) => f.ref.node && !f.node);
  for (const f of missing) errors.push(`${f.ref.faultId}: node ${f.ref.node} is not in the journal's inventory`);
  // the run's agents: taken back (or started again) on the nodes with faults left, deleted on every node at the end
  const inv = o.ctx.inventory;
  const pending = new RunAgents(
    o.ctx,
    agentTargets(
      inv,
      adopted.flatMap((f) => (f.node ? [f.node] : [])),
    ),
    view.run.faultTtlMs,
  );
  if (pending.targets.length)
    for (const p of await pending.start(o.ctx.signal).catch((e: unknown) => [messageOf(e)]))
      o.ctx.log.warn(`node agent: ${p} (reverts there wait for the node's dead-man)`);
  const wf = view.run.waitFor;
  try {
    errors.push(
      ...(await rollBack(ledger, {
        signal: o.ctx.signal,
        revertMs: revertTime(view.run.faultTtlMs),
        concurrency: 16,
        skip: (f) => missing.includes(f),
        async safeToUndoRemediations() {
          if (!wf || o.force) return true;
          const probe = await o.registry.probe(wf.probe);
          if (
            await rollbackConditionHolds(o.ctx, { probeId: wf.probe, probe, params: wf.with, withinMs: wf.withinMs }, o.ctx.signal, o.emit)
          )
            return true;
          errors.push(
            `remediation left in place: ${wf.probe} did not read ok within ${formatDuration(wf.withinMs)} (run recover --force to undo it anyway)`,
          );
          return false;
        },
      })),
    );
  } catch (e) {
    await lock.stop(ledger.outstanding());
    throw e;
  }
  const all = new RunAgents(o.ctx, agentTargets(inv, inv.spec.nodes), view.run.faultTtlMs);
  if (!ledger.outstanding().length) {
    const failed = all.targets.length ? await all.stop().catch((e: unknown) => [messageOf(e)]) : [];
    for (const f of failed) errors.push(`node agents of ${view.run.runId} not deleted: ${f}`);
    // a killed run, nothing left of it: ended, so recover does not pick it again (and its journal's copy can go)
    if (!failed.length && view.status === undefined) journal.append({ type: 'end', at: o.ctx.clock.now(), status: 'interrupted' });
  }
  journal.close();
  await lock.stop(ledger.outstanding());
  return {
    runId: view.run.runId,
    reverted: adopted.filter((f) => f.reverted).map((f) => f.ref),
    remaining: ledger.outstanding().map((f) => f.ref),
    errors,
  };
}

/**
 * Takes the run's lock for `recover` (same holder identity: the run's id), renews it every 30 s while recover works,
 * and at the end releases it when nothing remains, or leaves it held for as long as the node-side timers of what
 * remains. Best effort where the lock cannot be reached (the apiserver may be what a fault stopped).
 */
async function takeLock(view: JournalView, ctx: Ctx, holder: RunLockHolder | undefined | 'unreadable', adopted: AppliedFault[]) {
  const ns = view.run.lockNamespace;
  const runId = view.run.runId;
  const ttl = (f: AppliedFault) =>
    f.ref.remediation ? (view.run.remediationTtlMs ?? view.run.faultTtlMs) + (f.action.meta.nodeSideWaitMs ?? 0) : view.run.faultTtlMs;
  const forFaults = (faults: AppliedFault[]) => Math.max(view.run.faultTtlMs, ...faults.map(ttl)) + LOCK_MARGIN_MS;
  const opts = (state: RunLockState, durationMs: number): RunLockOptions => ({
    namespace: ns!,
    runId,
    where: `recover: ${safeUser()}@${hostname()} pid ${process.pid}`,
    durationMs,
    now: () => ctx.clock.now(),
    state,
    renewEveryMs: RECOVER_RENEW_MS,
  });
  let held = false;
  if (ns && (holder === undefined || holder === 'unreadable' || holder.runId === runId))
    held = await acquireRunLock(ctx.kube, opts('recovering', forFaults(adopted))).then(
      () => true,
      (e: unknown) => {
        ctx.log.warn(`could not take the cluster-wide run lock for ${runId}: ${messageOf(e)}`);
        return false;
      },
    );
  const stopRenewing = new AbortController();
  const renewing = held
    ? (async () => {
        for (;;) {
          try {
            await ctx.clock.sleep(RECOVER_RENEW_MS, stopRenewing.signal);
          } catch {
            return;
          }
          await renewRunLock(ctx.kube, opts('recovering', forFaults(adopted.filter((f) => !f.reverted)))).catch((e: unknown) =>
            ctx.log.warn(`could not renew the cluster-wide run lock: ${messageOf(e)}`),
          );
        }
      })()
    : Promise.resolve();
  return {
    async stop(remaining: AppliedFault[]): Promise<void> {
      stopRenewing.abort();
      await renewing;
      if (!held) return;
      held = false;
      const done = remaining.length
        ? renewRunLock(ctx.kube, opts('left', forFaults(remaining)))
        : releaseRunLock(ctx.kube, { namespace: ns!, runId });
      await done.catch((e: unknown) =>
        ctx.log.warn(
          `could not ${remaining.length ? 'renew' : 'release'} the cluster-wide run lock of ${runId} (it expires by itself): ${messageOf(e)}`,
        ),
      );
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
