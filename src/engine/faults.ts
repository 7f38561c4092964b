import type { Action } from '../contract/action.js';
import { KrError, messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { FailedAttempt } from '../core/retry.js';
import type { InventoryNode } from '../inventory/schema.js';
import type { ActionCtx } from '../contract/context.js';
import { deadmanDir, keepaliveScript, settleScript } from './deadman.js';
import { armDeadman, disarmDeadman, settleDeadman } from './fault-deadmen.js';
import type { AppliedFault, ApplyOn, FaultLedgerOptions, Who } from './fault-types.js';
import type { Attempt, FaultRef } from './events.js';
import { eachLimited } from '../core/each-limited.js';
import { agentConfigOf } from './agents.js';
import type { NodeAccess } from '../nodes/types.js';
import { type EngineRetry, retriedKinds, withRetries } from './retry.js';

/** How long an apply waits for the in-cluster copy of the journal to hold its fault. */
const JOURNAL_COPY_WAIT_MS = 10_000;

export type { AppliedFault, ApplyOn, FaultLedgerOptions } from './fault-types.js';

/**
 * Applies and reverts faults, in that order of record: journal (fsynced) → dead-man armed on the node → apply.
 * Revert: revert → journal → dead-man disarmed. Everything changing the cluster runs through one queue, so a
 * remediation a guard asks for never interleaves with a step's apply or a revert.
 *
 * What is safe to repeat is retried on transient failures (src/engine/retry.ts), each failed attempt journaled and
 * reported: prepare (read-only), arming the dead-man, the revert (idempotent by contract), the disarm, the
 * keepalive, and the apply of a remediation (its actions check what runs before changing it). A fault's apply is
 * not: an action's apply need not be idempotent. Each revert is bounded by its own time, counted from when it
 * starts: a node that cannot be reached uses up its own revert's time, not the others'.
 */
export class FaultLedger {
  readonly faults: AppliedFault[] = [];
  private seq = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: FaultLedgerOptions) {}

  /** Runs `fn` after everything queued before it. */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /** prepare → journal → arm → apply, on one target. The fault is recorded (and so rolled back) even if apply fails. */
  async apply(action: Action, params: Record<string, unknown>, node: InventoryNode | undefined, on: ApplyOn): Promise<AppliedFault> {
    const { step, remediation, signal } = on;
    const agent = node ? agentConfigOf(this.o.ctx.inventory, node) : undefined;
    // a fault that cuts its node off from the apiserver cuts the node's agent off too, before it can answer
    const isolating = Boolean(agent) && (action.meta.isolatesNode?.(params as never) ?? 'no') !== 'no';
    const ttlMs = remediation ? (this.o.remediationTtlMs ?? this.o.faultTtlMs) : this.o.faultTtlMs;
    const ctx: ActionCtx = {
      ...this.o.ctx,
      signal,
      node,
      faultTtlMs: ttlMs,
      ...(this.o.runEndsBy === undefined ? {} : { runEndsBy: this.o.runEndsBy }),
      ...(on.selection ? { selection: on.selection } : {}),
      ...(isolating ? { nodes: answeringWithin(this.o.ctx.nodes, ISOLATED_SILENCE_MS) } : {}),
    };
    const retry = (who: Who) => this.retrying(who, signal, on.deadline);
    await this.o.beforeApply?.(action, remediation);
    const state = await withRetries('prepare', () => action.prepare(ctx, params), retry({ node: node?.name, what: action.meta.id }));
    const faultId = `f${String(++this.seq).padStart(2, '0')}-${action.meta.id}${node ? `-${node.name}` : ''}`.replace(
      /[^A-Za-z0-9._-]/g,
      '_',
    );
    const nodeSide = node ? action.nodeSideRevert(state) : undefined;
    const ref: FaultRef = { faultId, action: action.meta.id, node: node?.name, step, remediation, manualRevert: nodeSide };
    const fault: AppliedFault = { ref, action, node, state, deadman: false, reverted: false };
    this.o.journal?.append({
      type: 'prepared',
      at: this.o.ctx.clock.now(),
      faultId,
      action: action.meta.id,
      node: node?.name,
      step,
      remediation,
      state,
      deadman: Boolean(nodeSide),
    });
    this.faults.push(fault);
    await this.journalCopied(faultId, signal);
    try {
      if (node && nodeSide) fault.deadman = await armDeadman(this.o, { fault, nodeSide, ttlMs, remediation, signal }, retry({ fault }));
      try {
        // a remediation protects the cluster: its apply is tried again (it is idempotent) until the step's deadline
        fault.state =
          remediation && action.meta.kind === 'remediation'
            ? await withRetries('apply', () => action.apply(ctx, state), { ...retry({ fault }), safeToRepeat: true })
            : await action.apply(ctx, state);
      } catch (e) {
        if (!(isolating && fault.deadman && e instanceof KrError && e.transient === 'agent silence')) throw e;
        this.warn(
          `${faultId}: the agent on ${node!.name} went silent after taking the apply, as this fault cuts the node off from the apiserver: ` +
            `counted applied; the node's dead-man reverts it ${formatDuration(remediation ? (this.o.remediationTtlMs ?? this.o.faultTtlMs) : this.o.faultTtlMs)} after the last run Lease renewal the node saw`,
        );
      }
      this.o.journal?.append({ type: 'applied', at: this.o.ctx.clock.now(), faultId, state: fault.state });
      this.o.emit({ type: 'fault-applied', at: this.o.ctx.clock.now(), fault: ref });
      if (action.meta.stopsEvictions)
        this.o.effects?.set(faultId, { action: action.meta.id, node: node?.name, stops: action.meta.stopsEvictions });
      return fault;
    } catch (e) {
      const error = messageOf(e);
      this.o.journal?.append({ type: 'apply-failed', at: this.o.ctx.clock.now(), faultId, error });
      this.o.emit({ type: 'fault-apply-failed', at: this.o.ctx.clock.now(), fault: ref, error });
      throw e;
    }
  }

  /**
   * Reverts one fault (idempotent), trying again on transient failures for `timeMs` from now (its own deadline,
   * whatever other reverts took); disarms its dead-man once reverted. Returns the error text on failure.
   */
  async revert(fault: AppliedFault, signal: AbortSignal, timeMs: number): Promise<string | undefined> {
    if (fault.reverted) return undefined;
    const { clock } = this.o.ctx;
    const deadline = clock.now() + timeMs;
    const ctx: ActionCtx = { ...this.o.ctx, signal, node: fault.node };
    const failures: FailedAttempt[] = [];
    const retry: EngineRetry = { ...this.retrying({ fault }, signal, deadline), safeToRepeat: true };
    if (fault.deadman && fault.node) await settleDeadman(this.o, fault, signal, this.retrying({ fault }, signal, deadline), deadline);
    try {
      await withRetries('revert', () => fault.action.revert(ctx, fault.state), retry, failures);
    } catch (e) {
      const error = messageOf(e);
      this.o.journal?.append({ type: 'revert-failed', at: clock.now(), faultId: fault.ref.faultId, error, attempts: failures.length });
      this.o.emit({
        type: 'fault-revert-failed',
        at: clock.now(),
        fault: fault.ref,
        error,
        attempts: failures.length,
        retried: retriedKinds(failures),
      });
      return error;
    }
    fault.reverted = true;
    this.o.effects?.set(fault.ref.faultId, undefined);
    const attempts = failures.length + 1;
    this.o.journal?.append({ type: 'reverted', at: clock.now(), faultId: fault.ref.faultId, by: this.o.by ?? 'executor', attempts });
    this.o.emit({ type: 'fault-reverted', at: clock.now(), fault: fault.ref, attempts, retried: retriedKinds(failures) });
    if (fault.deadman && fault.node) await disarmDeadman(this.o, fault, signal, retry);
    return undefined;
  }

  /**
   * Remediations the rollback may not undo yet (`rollback.waitFor` did not hold): they stay applied, in the journal,
   * until `kube-runbook recover` finds the condition holding (or is forced), and never without a timer: each keeps
   * its node-side dead-man, touched once more here so that it undoes the remediation a full `remediationTtl` after
   * the run left it (a node-side revert that waits for the nodes first where the action has one). The touch is tried
   * again like a revert, for `timeMs`; a node it cannot reach keeps the timer of its last keepalive.
   */
  async leaveInPlace(faults: AppliedFault[], signal: AbortSignal, reason: string, timeMs: number): Promise<void> {
    const { clock } = this.o.ctx;
    const ttl = formatDuration(this.o.remediationTtlMs ?? this.o.faultTtlMs);
    for (const f of faults) {
      this.o.journal?.append({ type: 'left-in-place', at: clock.now(), faultId: f.ref.faultId, reason });
      if (!f.deadman || !f.node) continue;
      const node = f.node.name;
      const touch = settleScript(this.o.ctx.runId, f.ref.faultId, 1);
      const retry: EngineRetry = { ...this.retrying({ fault: f }, signal, clock.now() + timeMs), safeToRepeat: true };
      const r = await withRetries('leave', () => this.o.ctx.nodes.exec(node, touch, { timeoutMs: 30_000, signal }), retry).catch(
        (e: unknown) => ({
          code: -1,
          stdout: '',
          stderr: messageOf(e),
        }),
      );
      if (r.code === 0 && /^armed$/m.test(r.stdout))
        this.o.emit({
          type: 'log',
          at: clock.now(),
          level: 'info',
          message: `${f.ref.faultId} left in place on ${node}: its node-side dead-man undoes it ${ttl} from now unless \`kube-runbook recover\` does first`,
        });
      else if (r.code === 0)
        this.warn(
          `${f.ref.faultId} is left in place but its dead-man on ${node} ${r.stdout.trim() || 'is gone'}: check ${deadmanDir(this.o.ctx.runId, f.ref.faultId)} on ${node}`,
        );
      else
        this.warn(
          `${f.ref.faultId} is left in place; its dead-man on ${node} could not be touched (${r.stderr.trim() || `exit ${r.code}`}): ` +
            `it undoes the remediation ${ttl} after the last keepalive that reached ${node}`,
        );
    }
  }

  /**
   * With an in-cluster copy of the journal, waits (up to JOURNAL_COPY_WAIT_MS) until the copy holds the fault before
   * it is applied, so `recover --from-cluster` finds it even when the pod and its disk are gone. A copy that cannot
   * be written (the apiserver stopped by an earlier step) does not hold the run back: a warning says so, and the
   * local journal and the node's dead-man still cover the fault.
   */
  private async journalCopied(faultId: string, signal: AbortSignal): Promise<void> {
    const journal = this.o.journal;
    if (!journal?.copied) return;
    const stop = new AbortController();
    const waited = this.o.ctx.clock.sleep(JOURNAL_COPY_WAIT_MS, AbortSignal.any([stop.signal, signal])).then(
      () => false,
      () => false,
    );
    const ok = await Promise.race([journal.synced(), waited]);
    stop.abort();
    if (!ok)
      this.warn(
        `${faultId}: the cluster's copy of the journal does not hold this fault (its ConfigMap could not be written); ` +
          `the local journal and the node's dead-man do`,
      );
  }

  private warn(message: string): void {
    this.o.emit({ type: 'log', at: this.o.ctx.clock.now(), level: 'warn', message });
  }

  /**
   * Reverts faults in the reverse order of application, the targets of one step together, `limit` at once, each
   * for `timeMs` from its own start; returns the failures.
   */
  async revertInOrder(faults: AppliedFault[], signal: AbortSignal, limit: number, timeMs: number): Promise<string[]> {
    const errors: string[] = [];
    const groups: AppliedFault[][] = [];
    for (const f of faults) {
      const g = groups[groups.length - 1];
      if (g && g[0]!.ref.step === f.ref.step) g.push(f);
      else groups.push([f]);
    }
    for (const g of groups.reverse())
      await this.serial(() =>
        eachLimited(g, limit, async (f) => {
          const error = await this.revert(f, signal, timeMs);
          if (error) errors.push(`${f.ref.faultId}: ${error}`);
        }),
      );
    return errors;
  }

  /** Touches the keepalive on every node with an armed dead-man, trying again on transient failures until `deadline` (the next touch). */
  async keepalive(signal: AbortSignal, deadline: number): Promise<void> {
    // nodes reached through agents follow the run Lease instead (src/engine/agents.ts)
    const nodes = new Set(
      this.faults
        .filter((f) => f.deadman && !f.reverted && f.node && !agentConfigOf(this.o.ctx.inventory, f.node))
        .map((f) => f.node!.name),
    );
    const script = keepaliveScript(this.o.ctx.runId);
    await Promise.all(
      [...nodes].map(async (n) => {
        try {
          const r = await withRetries(
            'keepalive',
            () => this.o.ctx.nodes.exec(n, script, { timeoutMs: 15_000, signal }),
            this.retrying({ node: n }, signal, deadline),
          );
          if (r.code !== 0) this.o.ctx.log.warn(`keepalive on ${n} failed: ${r.stderr.trim()}`);
        } catch (e) {
          this.o.ctx.log.warn(`keepalive on ${n} failed: ${messageOf(e)}`);
        }
      }),
    );
  }

  /** How this ledger retries: on its clock and back-off, each failed attempt journaled and reported. */
  private retrying(who: Who, signal: AbortSignal, deadline: number): EngineRetry {
    const { clock } = this.o.ctx;
    const faultId = who.fault?.ref.faultId;
    const node = who.node ?? who.fault?.node?.name;
    return {
      clock,
      signal,
      deadline,
      backoff: this.o.backoff,
      record: (a: Attempt) => {
        const at = clock.now();
        this.o.journal?.append({
          type: 'attempt',
          at,
          ...a,
          ...(faultId === undefined ? {} : { faultId }),
          ...(node === undefined ? {} : { node }),
        });
        this.o.emit({ type: 'attempt', at, ...a, fault: who.fault?.ref, node, what: who.what });
      },
    };
  }

  /** Adopts faults applied by an earlier process (recover). */
  adopt(faults: AppliedFault[]): void {
    this.faults.push(...faults);
  }

  outstanding(): AppliedFault[] {
    return this.faults.filter((f) => !f.reverted);
  }
}

/** How long an agent that took the apply of a fault isolating its node may stay silent before the cut counts as made. */
const ISOLATED_SILENCE_MS = 5000;

/** Node access whose scripts through agents count as cut off after `silenceMs` without an answer once taken. */
function answeringWithin(nodes: NodeAccess, silenceMs: number): NodeAccess {
  return { ...nodes, exec: (n, script, options) => nodes.exec(n, script, { ...options, silenceMs }) };
}
