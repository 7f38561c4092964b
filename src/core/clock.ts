/** Time as modules see it: always through ctx.clock, so tests can use a fake one (src/testing/fake-clock.ts). */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  setTimer(ms: number, fn: () => void): () => void;
}

export const realClock: Clock = {
  now: () => Date.now(), // eslint-disable-line no-restricted-syntax -- the one real clock
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const t = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
  setTimer(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return () => clearTimeout(t);
  },
};

/** `sleep` made of a clock's `setTimer`: resolves when the timer fires, rejects (and cancels it) when `signal` aborts. */
export function sleepWith(setTimer: Clock['setTimer'], ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const cancel = setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
