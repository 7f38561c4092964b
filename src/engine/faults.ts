import type { Action, RevertState } from '../contract/action.js';
import { messageOf } from '../core/errors.js';
import type { InventoryNode } from '../inventory/schema.js';
import type { ActionCtx, Ctx } from '../contract/context.js';
import { armScript, disarmScript, keepaliveScript } from './deadman.js';
import type { FaultRef, RunEventSink } from './events.js';
import type { Journal } from './journal.js';

export interface AppliedFault {
  ref: FaultRef;
  action: Action;
  node?: InventoryNode;
  state: RevertState;
  deadman: boolean;
  reverted: boolean;
}

export interface FaultLedgerOptions {
  ctx: Ctx;
  journal: Journal | null;
  emit: RunEventSink;
  faultTtlMs: number;
  /** Who reverts, for the journal. */
  by?: 'executor' | 'recover';
}

/**
 * Applies and reverts faults, in that order of record: journal (fsynced) → dead-man armed on the node → apply.
 * Revert: revert → journal → dead-man disarmed. Everything changing the cluster runs through one queue, so a
 * remediation a guard asks for never interleaves with a step's apply or a revert.
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
  async apply(
    action: Action,
    params: Record<string, unknown>,
    node: InventoryNode | undefined,
    step: string,
    remediation: boolean,
    signal: AbortSignal,
  ): Promise<AppliedFault> {
    const ctx: ActionCtx = { ...this.o.ctx, signal, node };
    const state = await action.prepare(ctx, params);
    const faultId = `f${String(++this.seq).padStart(2, '0')}-${action.meta.id}${node ? `-${node.name}` : ''}`.replace(/[^A-Za-z0-9._-]/g, '_');
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
    try {
      if (node && nodeSide) {
        const r = await this.o.ctx.nodes.exec(
          node.name,
          armScript({
            runId: this.o.ctx.runId,
            faultId,
            ttlMs: this.o.faultTtlMs,
            revert: nodeSide,
            allowSystemd: (node.transport ?? this.o.ctx.inventory.spec.transport).type !== 'netns',
          }),
          { timeoutMs: 30_000, signal },
        );
        if (r.code !== 0) throw new Error(`could not arm the dead-man on ${node.name}: ${r.stderr.trim() || `exit ${r.code}`}`);
        fault.deadman = true;
      }
      fault.state = await action.apply(ctx, state);
      this.o.journal?.append({ type: 'applied', at: this.o.ctx.clock.now(), faultId, state: fault.state });
      this.o.emit({ type: 'fault-applied', at: this.o.ctx.clock.now(), fault: ref });
      return fault;
    } catch (e) {
      const error = messageOf(e);
      this.o.journal?.append({ type: 'apply-failed', at: this.o.ctx.clock.now(), faultId, error });
      this.o.emit({ type: 'fault-apply-failed', at: this.o.ctx.clock.now(), fault: ref, error });
      throw e;
    }
  }

  /** Reverts one fault (idempotent); disarms its dead-man once reverted. Returns the error text on failure. */
  async revert(fault: AppliedFault, signal: AbortSignal): Promise<string | undefined> {
    if (fault.reverted) return undefined;
    const ctx: ActionCtx = { ...this.o.ctx, signal, node: fault.node };
    try {
      await fault.action.revert(ctx, fault.state);
    } catch (e) {
      const error = messageOf(e);
      this.o.journal?.append({ type: 'revert-failed', at: this.o.ctx.clock.now(), faultId: fault.ref.faultId, error });
      this.o.emit({ type: 'fault-revert-failed', at: this.o.ctx.clock.now(), fault: fault.ref, error });
      return error;
    }
    fault.reverted = true;
    this.o.journal?.append({ type: 'reverted', at: this.o.ctx.clock.now(), faultId: fault.ref.faultId, by: this.o.by ?? 'executor' });
    this.o.emit({ type: 'fault-reverted', at: this.o.ctx.clock.now(), fault: fault.ref });
    if (fault.deadman && fault.node) {
      const r = await this.o.ctx.nodes
        .exec(fault.node.name, disarmScript(this.o.ctx.runId, fault.ref.faultId), { timeoutMs: 30_000, signal })
        .catch((e: unknown) => ({ code: -1, stdout: '', stderr: messageOf(e) }));
      if (r.code !== 0)
        this.o.ctx.log.warn(`dead-man of ${fault.ref.faultId} on ${fault.node.name} not disarmed (it finds the fault reverted and does nothing harmful): ${r.stderr.trim()}`);
      const fired = /^fired (\S*)/m.exec(r.stdout);
      if (fired) this.o.ctx.log.warn(`the node-side dead-man on ${fault.node.name} had already reverted ${fault.ref.faultId} (exit ${fired[1] || '?'})`);
    }
    return undefined;
  }

  /** Reverts faults in the reverse order of application, the targets of one step together, `limit` at once; returns the failures. */
  async revertInOrder(faults: AppliedFault[], signal: AbortSignal, limit: number): Promise<string[]> {
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
          const error = await this.revert(f, signal);
          if (error) errors.push(`${f.ref.faultId}: ${error}`);
        }),
      );
    return errors;
  }

  /** Touches the keepalive on every node with an armed dead-man. */
  async keepalive(signal: AbortSignal): Promise<void> {
    const nodes = new Set(this.faults.filter((f) => f.deadman && !f.reverted && f.node).map((f) => f.node!.name));
    await Promise.all(
      [...nodes].map(async (n) => {
        try {
          const r = await this.o.ctx.nodes.exec(n, keepaliveScript(this.o.ctx.runId), { timeoutMs: 15_000, signal });
          if (r.code !== 0) this.o.ctx.log.warn(`keepalive on ${n} failed: ${r.stderr.trim()}`);
        } catch (e) {
          this.o.ctx.log.warn(`keepalive on ${n} failed: ${messageOf(e)}`);
        }
      }),
    );
  }

  /** Adopts faults applied by an earlier process (recover). */
  adopt(faults: AppliedFault[]): void {
    this.faults.push(...faults);
  }

  outstanding(): AppliedFault[] {
    return this.faults.filter((f) => !f.reverted);
  }
}

/** Runs `fn` over items with at most `limit` at once. */
export async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const errors: unknown[] = [];
  await Promise.all(
    Array.from({ length: Math.min(limit, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
        try {
          await fn(item);
        } catch (e) {
          errors.push(e);
        }
      }
    }),
  );
  if (errors.length) throw errors[0];
}
