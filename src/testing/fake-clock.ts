import { sleepWith, type Clock } from '../core/clock.js';

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A clock that moves only when told. `advance(ms)` fires due timers in order and lets pending promise
 * callbacks run between them, so code awaiting `sleep` proceeds as it would in real time.
 */
export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private timers: Timer[] = [];

  constructor(start = Date.UTC(2026, 0, 1, 0, 0, 0)) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const timer: Timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((x) => x !== timer);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith((t, fn) => this.setTimer(t, fn), ms, signal);
  }

  /** Number of timers waiting. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await flush();
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.timers.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
      await flush();
    }
    this.t = end;
    await flush();
  }

  /** Advances in steps of `step` until `cond()` holds or `max` ms have passed; returns whether it held. */
  async runUntil(cond: () => boolean, max = 600_000, step = 100): Promise<boolean> {
    for (let waited = 0; waited <= max; waited += step) {
      if (cond()) return true;
      await this.advance(step);
    }
    return cond();
  }
}

/** Lets queued promise callbacks and immediate tasks run. */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((r) => setImmediate(r));
}
