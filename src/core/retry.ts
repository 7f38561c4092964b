import pRetry from 'p-retry';
import type { Clock } from './clock.js';
import { messageOf } from './errors.js';

/** Jittered exponential back-off: the n-th wait is between half and all of min(maxMs, firstMs·2^(n−1)). */
export interface Backoff {
  firstMs: number;
  maxMs: number;
  /** 0..1; tests pass a constant. */
  random: () => number;
}

const DEFAULT_BACKOFF: Backoff = { firstMs: 500, maxMs: 8000, random: Math.random };

/** One failed attempt, as the caller journals and reports it. */
export interface FailedAttempt {
  attempt: number;
  error: string;
  /** What failed when trying again can help (a count noun: "connection reset"); absent when it cannot. */
  transient?: string;
  /** Another attempt follows after this many ms; absent when this failure is final. */
  retryInMs?: number;
}

export interface RetryOptions {
  clock: Clock;
  /** Aborting it ends the waiting: the last failure is thrown. */
  signal?: AbortSignal;
  /** No attempt starts after this time (on `clock`): the rollback deadline, or the end of a step's timeout. */
  deadline: number;
  /** The failure's kind when trying again can help, undefined when it cannot: each transport decides for its own errors. */
  classify: (error: unknown) => string | undefined;
  onFailure?: (failure: FailedAttempt) => void;
  /** At most this many attempts (no limit but the deadline when absent). */
  maxAttempts?: number;
  backoff?: Partial<Backoff>;
}

/** The wait after `failures` failed attempts ("equal jitter": half fixed, half random). */
export function backoffDelay(failures: number, b: Backoff = DEFAULT_BACKOFF): number {
  const base = Math.min(b.maxMs, b.firstMs * 2 ** Math.max(0, failures - 1));
  return Math.round(base / 2 + (base / 2) * b.random());
}

/**
 * The one retry policy for transient failures, on p-retry: `fn` is called until it succeeds, fails for a reason
 * `classify` calls permanent, the deadline passes, the attempts run out or the signal aborts; then the last error is
 * thrown. Every failure is reported to `onFailure`, with the wait before the next attempt if there is one.
 *
 * p-retry waits with its own setTimeout and measures `maxRetryTime` on performance.now(), neither of which follows
 * the injected clock (tests use a fake one). So its own delay is zero and its time limit unset: the back-off is
 * slept in `shouldRetry` on `clock`, and the deadline is checked on `clock` too.
 */
export async function retrying<T>(fn: (attempt: number) => Promise<T>, o: RetryOptions): Promise<T> {
  const backoff = { ...DEFAULT_BACKOFF, ...o.backoff };
  let wait: number | undefined;
  return pRetry(fn, {
    retries: o.maxAttempts === undefined ? Number.POSITIVE_INFINITY : Math.max(0, o.maxAttempts - 1),
    minTimeout: 0,
    signal: o.signal,
    onFailedAttempt: ({ error, attemptNumber }) => {
      // p-retry never retries a TypeError that is not a network error (a bug, not a flaky connection)
      const transient = error instanceof TypeError ? undefined : o.classify(error);
      const more = o.maxAttempts === undefined || attemptNumber < o.maxAttempts;
      const left = o.deadline - o.clock.now();
      wait =
        transient !== undefined && more && left > 0 && !o.signal?.aborted
          ? Math.min(backoffDelay(attemptNumber, backoff), left)
          : undefined;
      o.onFailure?.({
        attempt: attemptNumber,
        error: messageOf(error),
        ...(transient === undefined ? {} : { transient }),
        ...(wait === undefined ? {} : { retryInMs: wait }),
      });
    },
    shouldRetry: async () => {
      if (wait === undefined) return false;
      try {
        await o.clock.sleep(wait, o.signal);
      } catch {
        return false; // aborted while waiting: the last failure stands
      }
      return true;
    },
  });
}
