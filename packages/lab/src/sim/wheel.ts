import { sleepWith, type Clock } from 'kube-runbook/internal/core/clock.js';

/**
 * A clock whose timers share one underlying timer per tick: hundreds of simulated nodes in one process each
 * sleep between renewals, and their wake-ups, rounded up to the next multiple of `tickMs`, fire together from
 * one callback instead of hundreds of timers. A timer never fires early; it fires at most `tickMs` late, far
 * inside the kubelet's own 4 % renew jitter at the lab's 2 s interval with a 20 ms tick.
 * (Node's own timer lists key on the duration, not on the due time, so they do not batch these.)
 */
export class WheelClock implements Clock {
  private readonly slots = new Map<number, Set<() => void>>();

  constructor(
    private readonly base: Clock,
    readonly tickMs = 20,
  ) {}

  now(): number {
    return this.base.now();
  }

  /** Callbacks waiting, over all ticks. */
  get pending(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.size;
    return n;
  }

  /** Ticks with at least one callback: the underlying timers armed. */
  get armed(): number {
    return this.slots.size;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const now = this.base.now();
    const due = Math.ceil((now + Math.max(0, ms)) / this.tickMs) * this.tickMs;
    let slot = this.slots.get(due);
    if (!slot) {
      const fresh = new Set<() => void>();
      slot = fresh;
      this.slots.set(due, fresh);
      this.base.setTimer(due - now, () => {
        this.slots.delete(due);
        for (const f of fresh) f();
      });
    }
    const entry = () => fn();
    slot.add(entry);
    const mine = slot;
    return () => {
      mine.delete(entry);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith((t, fn) => this.setTimer(t, fn), ms, signal);
  }
}
