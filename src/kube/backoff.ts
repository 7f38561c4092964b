/**
 * Exponential back-off between failed list/watch attempts, as client-go's reflector does: 0.8 s doubling up to
 * 30 s, with jitter, back to the start once a connection has stayed healthy for a while.
 */
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** A connection that stayed healthy this long resets the delay. */
  resetAfterMs: number;
  /** 0..1: each delay is stretched by up to this fraction, at random. */
  jitter: number;
  random: () => number;
}

export const defaultBackoff: BackoffOptions = {
  initialMs: 800,
  maxMs: 30_000,
  resetAfterMs: 120_000,
  jitter: 0.2,
  random: Math.random,
};

export class Backoff {
  private attempt = 0;

  constructor(private readonly o: BackoffOptions = defaultBackoff) {}

  /** The delay before the next attempt; each call doubles the following one, up to the cap. */
  next(): number {
    const base = Math.min(this.o.maxMs, this.o.initialMs * 2 ** this.attempt);
    if (base < this.o.maxMs) this.attempt++;
    return Math.min(this.o.maxMs, Math.round(base * (1 + this.o.jitter * this.o.random())));
  }

  /** Called with how long the last connection stayed up; a long enough one starts the delays over. */
  healthyFor(ms: number): void {
    if (ms >= this.o.resetAfterMs) this.reset();
  }

  reset(): void {
    this.attempt = 0;
  }
}
