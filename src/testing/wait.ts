import { realClock } from '../core/clock.js';

/**
 * The tests' one way to wait for something that happens on real time (a process, a lab, a file): `cond` is checked
 * every `everyMs` until it holds or `timeoutMs` have passed. A check that does not answer (a request or command that
 * hangs) ends the wait at the deadline too, and a check that throws counts as not yet.
 */
async function poll(cond: () => Promise<boolean> | boolean, timeoutMs: number, everyMs: number): Promise<number | undefined> {
  const t0 = realClock.now();
  for (;;) {
    let cancel: (() => void) | undefined;
    const deadline = new Promise<false>(
      (resolve) => (cancel = realClock.setTimer(Math.max(0, t0 + timeoutMs - realClock.now()), () => resolve(false))),
    );
    try {
      if (
        await Promise.race([
          Promise.resolve()
            .then(cond)
            .catch(() => false),
          deadline,
        ])
      )
        return realClock.now() - t0;
    } finally {
      cancel?.();
    }
    if (realClock.now() - t0 >= timeoutMs) return undefined;
    await realClock.sleep(everyMs);
  }
}

/** Waits for `what` to come true; resolves with the milliseconds it took, or throws naming it and the limit. */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 60_000, everyMs = 200): Promise<number> {
  const took = await poll(cond, timeoutMs, everyMs);
  if (took === undefined) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  return took;
}

/** Whether `cond` comes true within `timeoutMs`, checked every `everyMs` (for an assertion on the answer). */
export async function eventually(cond: () => Promise<boolean> | boolean, timeoutMs = 10_000, everyMs = 50): Promise<boolean> {
  return (await poll(cond, timeoutMs, everyMs)) !== undefined;
}
