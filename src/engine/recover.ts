import { hostname } from 'node:os';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import { releaseRunLock } from '../kube/run-lock.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { FaultRef, RunEventSink } from './events.js';
import { type AppliedFault, FaultLedger } from './faults.js';
import { Journal, type JournalView, outstanding } from './journal.js';
import { contextAllowed } from './preflight.js';
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

/** Whether the run's own process still runs on this machine (then it should be interrupted, not recovered). */
function runStillActive(view: JournalView): boolean {
  return view.status === undefined && view.run.host === hostname() && view.run.pid !== process.pid && alive(view.run.pid);
}

/**
 * Reverts, from the journal alone, every fault of a run that was prepared and not reverted: faults in reverse order,
 * then remediations — after the run's rollback condition holds, unless `force`. Works in a new process: the state
 * each action needs is in the journal, and the inventory snapshot says how to reach the nodes.
 */
export async function recoverRun(
  view: JournalView,
  o: { ctx: Ctx; registry: Registry; emit: RunEventSink; force?: boolean },
): Promise<RecoverResult> {
  if (runStillActive(view) && !o.force)
    throw new KrError(
      'RUN_STILL_ACTIVE',
      `run ${view.run.runId} is still in progress (pid ${view.run.pid}); interrupt it (Ctrl-C) to roll back, or pass --force`,
      { exit: 2 },
    );
  const allow = view.run.allowContexts;
  const context = o.ctx.kube.contextName;
  if (allow && !contextAllowed(context, o.ctx.kube.server, allow))
    throw new KrError(
      'CONTEXT_NOT_ALLOWED',
      `run ${view.run.runId}: context "${context}" is not in its runbook's spec.safety.allowContexts (${allow.join(', ') || 'none listed'}); nothing was touched`,
      { exit: EXIT.refused },
    );
  const journal = new Journal(view.file);
  const ledger = new FaultLedger({ ctx: o.ctx, journal, emit: o.emit, faultTtlMs: view.run.faultTtlMs, remediationTtlMs: view.run.remediationTtlMs, by: 'recover' });
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
  const errors: string[] = [];
  const missing = adopted.filter((f) => f.ref.node && !f.node);
  for (const f of missing) errors.push(`${f.ref.faultId}: node ${f.ref.node} is not in the journal's inventory`);
  // the run's agents: taken back (or started again) on the nodes with faults left, deleted on every node at the end
  const inv = o.ctx.inventory;
  const pending = new RunAgents(o.ctx, agentTargets(inv, adopted.flatMap((f) => (f.node ? [f.node] : []))), view.run.faultTtlMs);
  if (pending.targets.length)
    for (const p of await pending.start(o.ctx.signal).catch((e: unknown) => [messageOf(e)]))
      o.ctx.log.warn(`node agent: ${p} (reverts there wait for the node's dead-man)`);
  const wf = view.run.waitFor;
  errors.push(
    ...(await rollBack(ledger, {
      signal: o.ctx.signal,
      revertMs: revertTime(view.run.faultTtlMs),
      concurrency: 16,
      skip: (f) => missing.includes(f),
      async safeToUndoRemediations() {
        if (!wf || o.force) return true;
        const probe = await o.registry.probe(wf.probe);
        if (await rollbackConditionHolds(o.ctx, { probeId: wf.probe, probe, params: wf.with, withinMs: wf.withinMs }, o.ctx.signal, o.emit)) return true;
        errors.push(`remediation left in place: ${wf.probe} did not read ok within ${formatDuration(wf.withinMs)} (run recover --force to undo it anyway)`);
        return false;
      },
    })),
  );
  const all = new RunAgents(o.ctx, agentTargets(inv, inv.spec.nodes), view.run.faultTtlMs);
  if (all.targets.length && !ledger.outstanding().length) {
    const failed = await all.stop().catch((e: unknown) => [messageOf(e)]);
    for (const f of failed) errors.push(`node agents of ${view.run.runId} not deleted: ${f}`);
    // a killed run, nothing left of it: ended, so recover does not pick it again
    if (!failed.length && view.status === undefined) journal.append({ type: 'end', at: o.ctx.clock.now(), status: 'interrupted' });
  }
  journal.close();
  const ns = view.run.lockNamespace;
  if (ns && !ledger.outstanding().length)
    await releaseRunLock(o.ctx.kube, { namespace: ns, runId: view.run.runId }).catch((e: unknown) =>
      o.ctx.log.warn(`could not release the cluster-wide run lock of ${view.run.runId} (it expires by itself): ${messageOf(e)}`),
    );
  return {
    runId: view.run.runId,
    reverted: adopted.filter((f) => f.reverted).map((f) => f.ref),
    remaining: ledger.outstanding().map((f) => f.ref),
    errors,
  };
}
