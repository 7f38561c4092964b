import { withDeclarations } from './declarations.js';
import type { Reading } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import type { Ctx } from '../contract/context.js';
import type { RunEventSink } from './events.js';
import type { PlannedGuard } from './plan.js';
import { consumeProbe } from './probe-stream.js';

export interface GuardHandlers {
  abort(reason: string): void;
  remediate(reason: string): void;
}

interface GuardState {
  guard: PlannedGuard;
  last?: Reading;
  unknownSince?: number;
  cancelUnknownTimer?: () => void;
  holding: boolean;
  /** This violation has been acted on; cleared when the guard reads anything else. */
  fired: boolean;
}

/**
 * Watches every guard's probe and reacts to each reading as it arrives (no polling timer). Before `arm()`
 * (the first fault) readings are only shown; after it, a violation aborts, remediates or warns, and an
 * unknown reading aborts, holds (no new step starts; abort after `unknownFor`) or is ignored.
 */
export class GuardSet {
  private readonly states: GuardState[];
  private readonly stop = new AbortController();
  private armed = false;
  private waiters: (() => void)[] = [];
  private running: Promise<void>[] = [];

  constructor(
    guards: PlannedGuard[],
    private readonly ctx: Ctx,
    private readonly emit: RunEventSink,
    private readonly on: GuardHandlers,
  ) {
    this.states = guards.map((guard) => ({ guard, holding: false, fired: false }));
  }

  start(): void {
    this.running = this.states.map((s) =>
      consumeProbe(this.ctx, s.guard.probe, s.guard.params, this.stop.signal, (r) => {
        this.onReading(s, r);
      }),
    );
  }

  arm(): void {
    if (this.armed) return;
    this.armed = true;
    for (const s of this.states) if (s.last) this.onReading(s, s.last, false);
  }

  /** Latest reading of each guard, for the live view and confirmations. */
  latest(): { name: string; reading?: Reading }[] {
    return this.states.map((s) => ({ name: s.guard.name, reading: s.last }));
  }

  /** Resolves when no guard is holding (every `hold` guard has a known reading). */
  async clear(signal: AbortSignal): Promise<void> {
    while (this.states.some((s) => this.blocks(s))) {
      if (signal.aborted) return;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  /** Names of guards a new step waits for. */
  holdingGuards(): string[] {
    return this.states.filter((s) => this.blocks(s)).map((s) => s.guard.name);
  }

  async close(): Promise<void> {
    this.stop.abort();
    for (const s of this.states) s.cancelUnknownTimer?.();
    await Promise.all(this.running);
    this.wake();
  }

  private blocks(s: GuardState): boolean {
    return s.guard.onUnknown === 'hold' && (!s.last || s.last.status === 'unknown');
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private onReading(s: GuardState, r: Reading, fresh = true): void {
    s.last = r;
    const g = s.guard;
    if (fresh) this.emit({ type: 'guard-reading', at: r.at, guard: g.name, reading: r, armed: this.armed, ...withDeclarations(g.probe) });
    if (r.status !== 'violated') s.fired = false;
    if (r.status !== 'unknown') {
      s.unknownSince = undefined;
      s.cancelUnknownTimer?.();
      s.cancelUnknownTimer = undefined;
      if (s.holding) {
        s.holding = false;
        this.emit({ type: 'guard-fired', at: r.at, guard: g.name, response: 'resume', detail: r.detail });
      }
      this.wake();
    }
    if (!this.armed) return;
    if (r.status === 'violated') {
      // one response per violation: a guard that stays violated does not fire again on every reading
      if (s.fired) return;
      s.fired = true;
      const reason = `guard ${g.name} violated: ${r.detail}`;
      this.emit({ type: 'guard-fired', at: r.at, guard: g.name, response: g.onViolation, detail: r.detail });
      if (g.onViolation === 'warn') return;
      if (g.onViolation === 'abort') this.on.abort(reason);
      else this.on.remediate(reason);
      return;
    }
    if (r.status === 'unknown' && g.onUnknown !== 'ignore') {
      if (g.onUnknown === 'abort') {
        this.emit({ type: 'guard-fired', at: r.at, guard: g.name, response: 'abort', detail: `cannot see: ${r.detail}` });
        this.on.abort(`guard ${g.name} cannot see (onUnknown: abort): ${r.detail}`);
        return;
      }
      if (s.unknownSince === undefined) {
        s.unknownSince = r.at;
        s.holding = true;
        this.emit({ type: 'guard-fired', at: r.at, guard: g.name, response: 'hold', detail: r.detail });
        s.cancelUnknownTimer = this.ctx.clock.setTimer(g.unknownForMs, () => {
          s.cancelUnknownTimer = undefined;
          const detail = `unknown for ${formatDuration(g.unknownForMs)}: ${s.last?.detail ?? ''}`;
          this.emit({ type: 'guard-fired', at: this.ctx.clock.now(), guard: g.name, response: 'abort', detail });
          this.on.abort(`guard ${g.name} ${detail}`);
        });
      }
    }
  }
}
