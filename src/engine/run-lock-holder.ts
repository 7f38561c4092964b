import { hostname, userInfo } from 'node:os';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { Action } from '../contract/action.js';
import { acquireRunLock, releaseRunLock, renewRunLock, RUN_LOCK_NAME, type RunLockOptions, type RunLockState } from './run-lock-lease.js';
import type { RunControl } from './control.js';
import type { Attempt, RunEventSink } from './events.js';
import type { AppliedFault } from './faults.js';
import type { Plan } from './plan.js';
import { withRetries } from './retry.js';

/** How much longer than the dead-men it covers the lock lasts after its last renewal. */
const LOCK_MARGIN_MS = 60_000;

/**
 * How long the end of a run tries to release the lock through transient failures: an apiserver just back from an
 * etcd or apiserver fault may answer 503 or reset connections for a while, and a lock not released keeps the next run
 * out until it expires (minutes).
 */
const RELEASE_RETRY_MS = 30_000;

/** Retries of what a run renews (its lock, its agents' Lease), each until `deadline`, reported as attempts. */
export const renewalRetries = (ctx: Pick<Ctx, 'clock'>, emit: RunEventSink, signal: AbortSignal, deadline: number) => ({
  clock: ctx.clock,
  signal,
  deadline,
  safeToRepeat: true,
  record: (a: Attempt) => emit({ type: 'attempt', at: ctx.clock.now(), ...a }),
});

/**
 * The cluster-wide run lock as a run holds it: taken after preflight, renewed every `everyMs` while the run lives,
 * made to outlast each remediation's dead-man before it is applied, and at the end released, or left held (no longer
 * renewed) until every dead-man of what is still applied has fired. Losing it rolls the run back.
 */
export class RunLockHolder {
  private locked = false;
  private renewed = 0;
  /** How long it must outlive a dead holder: until each dead-man of what the run applied has fired. */
  private outlast: number;

  constructor(private readonly o: { ctx: Ctx; safety: Plan['safety']; everyMs: number; emit: RunEventSink; control: RunControl }) {
    this.outlast = o.safety.faultTtl;
  }

  /** Takes the lock; throws (another run holds it, or the cluster refused) and the run is refused. */
  async acquire(): Promise<void> {
    await acquireRunLock(this.o.ctx.kube, this.options());
    this.locked = true;
    this.renewed = this.o.ctx.clock.now();
  }

  /** Renews it every `everyMs` until `signal` aborts or it is lost. */
  async hold(signal: AbortSignal): Promise<void> {
    while (this.locked) {
      try {
        await this.o.ctx.clock.sleep(this.o.everyMs, signal);
      } catch {
        return;
      }
      if (!(await this.renew(signal))) return;
    }
  }

  /**
   * Before a remediation (or protective step) is applied: the lock must outlast its dead-man (remediationTtl) and
   * its node-side wait, should the executor die now; renewed so at once, or the apply does not happen.
   */
  async outlastRemediation(action: Action): Promise<void> {
    const need = (this.o.safety.remediationTtl ?? this.o.safety.faultTtl) + (action.meta.nodeSideWaitMs ?? 0);
    if (need <= this.outlast) return;
    this.outlast = need;
    if (this.locked && !(await this.renew(this.o.control.hard.signal)))
      throw new Error('the cluster-wide run lock could not be made to outlast the remediation; not applied');
  }

  /**
   * At the end: released when nothing is left applied; else held, no longer renewed, until each dead-man of what is
   * left has fired (or `recover` releases it), so that a second run cannot start while a remediation of this one is
   * still applied.
   */
  async end(left: readonly AppliedFault[], recoverCommand: string): Promise<void> {
    if (!this.locked) return;
    const { ctx, emit } = this.o;
    if (!left.length) {
      await withRetries(
        'lock',
        () => releaseRunLock(ctx.kube, this.options()),
        renewalRetries(ctx, emit, this.o.control.hard.signal, ctx.clock.now() + RELEASE_RETRY_MS),
      ).catch((e: unknown) =>
        ctx.log.warn(
          `could not release the cluster-wide run lock (it expires by itself, ${formatDuration(this.outlast + LOCK_MARGIN_MS)} after its last renewal): ${messageOf(e)}`,
        ),
      );
      return;
    }
    const ms = this.leftFor(left);
    if (await this.renew(new AbortController().signal, 'left', ms))
      emit({
        type: 'log',
        at: ctx.clock.now(),
        level: 'warn',
        message:
          `the cluster-wide run lock stays held for ${formatDuration(ms)}, until the node-side timers of what is left have undone it; ` +
          `${recoverCommand} undoes it and releases the lock`,
      });
  }

  private options(state: RunLockState = 'running', durationMs = this.outlast + LOCK_MARGIN_MS): RunLockOptions {
    const { ctx, safety } = this.o;
    return {
      namespace: safety.lockNamespace,
      runId: ctx.runId,
      where: `${safeUser()}@${hostname()} pid ${process.pid}`,
      durationMs,
      now: () => ctx.clock.now(),
      state,
      renewEveryMs: this.o.everyMs,
    };
  }

  /** Renews it, tried again until it would expire; false once it is lost (another run holds it, or it expired). */
  private async renew(signal: AbortSignal, state: RunLockState = 'running', durationMs?: number): Promise<boolean> {
    const { ctx, emit } = this.o;
    const expires = this.renewed + this.outlast + LOCK_MARGIN_MS;
    try {
      const held = await withRetries(
        'lock',
        () => renewRunLock(ctx.kube, this.options(state, durationMs)),
        renewalRetries(ctx, emit, signal, expires),
      );
      if (held) this.renewed = ctx.clock.now();
      else this.lost('another run holds it now (it expired, or was released)');
      return held;
    } catch (e) {
      if (signal.aborted) return true;
      if (ctx.clock.now() < expires) {
        ctx.log.warn(`could not renew the cluster-wide run lock (${messageOf(e)}); trying again`);
        return true;
      }
      this.lost(`it could not be renewed before it expired: ${messageOf(e)}`);
      return false;
    }
  }

  private lost(why: string): void {
    if (!this.locked) return;
    this.locked = false;
    const { ctx, emit, control, safety } = this.o;
    const message = `lost the cluster-wide run lock (Lease ${safety.lockNamespace}/${RUN_LOCK_NAME}): ${why}`;
    emit({ type: 'log', at: ctx.clock.now(), level: 'error', message: `${message}${control.rollingBack ? '' : '; rolling back'}` });
    if (!control.rollingBack) control.abort('aborted', message);
  }

  /** How long the lock must outlast the run for what it leaves applied: until each dead-man has fired. */
  private leftFor(left: readonly AppliedFault[]): number {
    const { safety } = this.o;
    const ttl = (f: AppliedFault) =>
      f.ref.remediation ? (safety.remediationTtl ?? safety.faultTtl) + (f.action.meta.nodeSideWaitMs ?? 0) : safety.faultTtl;
    return Math.max(...left.map(ttl)) + LOCK_MARGIN_MS;
  }
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
