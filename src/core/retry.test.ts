import { describe, expect, it } from 'vitest';
import { FakeClock, flush } from '../testing/fake-clock.js';
import { KrError } from './errors.js';
import { backoffDelay, type FailedAttempt, retrying } from './retry.js';

const reset = () => new KrError('NODE_UNREACHABLE', 'Connection reset by peer', { transient: 'connection reset' });
const classify = (e: unknown) => (e instanceof KrError ? e.transient : undefined);
const half = { random: () => 0.5 };

/** A function failing with `errors` in turn, then answering 'done'; records the clock time of each call. */
function failing(clock: FakeClock, errors: Error[]) {
  const calls: number[] = [];
  const fn = async (attempt: number) => {
    calls.push(clock.now());
    const e = errors[attempt - 1];
    if (e) throw e;
    return 'done';
  };
  return { calls, fn };
}

describe('backoffDelay', () => {
  it('doubles from 0.5s up to 8s, each wait between half and all of its step', () => {
    const steps = [500, 1000, 2000, 4000, 8000, 8000, 8000];
    for (const [i, step] of steps.entries()) {
      expect(backoffDelay(i + 1, { firstMs: 500, maxMs: 8000, random: () => 0 })).toBe(step / 2);
      expect(backoffDelay(i + 1, { firstMs: 500, maxMs: 8000, random: () => 1 })).toBe(step);
    }
  });
});

describe('retrying', () => {
  it('tries again after transient failures, on the clock it is given, and reports every failure', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const { calls, fn } = failing(clock, [reset(), reset()]);
    const failures: FailedAttempt[] = [];
    const result = retrying(fn, { clock, deadline: start + 60_000, classify, onFailure: (f) => failures.push(f), backoff: half });
    await flush();
    expect(calls).toEqual([start]);
    await clock.advance(374);
    expect(calls).toHaveLength(1);
    await clock.advance(1);
    expect(calls).toEqual([start, start + 375]);
    await clock.advance(750);
    expect(await result).toBe('done');
    expect(calls).toEqual([start, start + 375, start + 1125]);
    expect(failures).toEqual([
      { attempt: 1, error: 'Connection reset by peer', transient: 'connection reset', retryInMs: 375 },
      { attempt: 2, error: 'Connection reset by peer', transient: 'connection reset', retryInMs: 750 },
    ]);
  });

  it('stops at once on a permanent failure', async () => {
    const clock = new FakeClock();
    const permanent = new KrError('COMMAND_FAILED', 'revert failed on node-1 (exit 1)');
    const { calls, fn } = failing(clock, [permanent, reset()]);
    const failures: FailedAttempt[] = [];
    await expect(retrying(fn, { clock, deadline: clock.now() + 60_000, classify, onFailure: (f) => failures.push(f) })).rejects.toBe(
      permanent,
    );
    expect(calls).toHaveLength(1);
    expect(failures).toEqual([{ attempt: 1, error: 'revert failed on node-1 (exit 1)' }]);
  });

  it('starts no attempt after the deadline, and shortens the last wait to it', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const { calls, fn } = failing(clock, Array.from({ length: 50 }, reset));
    const failures: FailedAttempt[] = [];
    const result = retrying(fn, { clock, deadline: start + 2000, classify, onFailure: (f) => failures.push(f), backoff: half }).catch(
      (e: unknown) => e,
    );
    await clock.advance(10_000);
    expect(await result).toMatchObject({ code: 'NODE_UNREACHABLE' });
    // waits 375, 750, then 875 (not 1500): the deadline at 2000
    expect(calls.map((t) => t - start)).toEqual([0, 375, 1125, 2000]);
    expect(failures.map((f) => f.retryInMs)).toEqual([375, 750, 875, undefined]);
    expect(failures.at(-1)).toMatchObject({ attempt: 4, transient: 'connection reset' });
  });

  it('ends the waiting when the signal aborts, with the last failure', async () => {
    const clock = new FakeClock();
    const ac = new AbortController();
    const { calls, fn } = failing(clock, Array.from({ length: 50 }, reset));
    const result = retrying(fn, { clock, signal: ac.signal, deadline: clock.now() + 600_000, classify }).catch((e: unknown) => e);
    await clock.advance(2000);
    const before = calls.length;
    expect(before).toBeGreaterThan(1);
    ac.abort(new Error('stopped at once'));
    await clock.advance(60_000);
    expect(await result).toMatchObject({ message: 'Connection reset by peer' });
    expect(calls).toHaveLength(before);
  });

  it('makes at most maxAttempts attempts', async () => {
    const clock = new FakeClock();
    const { calls, fn } = failing(clock, Array.from({ length: 50 }, reset));
    const result = retrying(fn, { clock, deadline: clock.now() + 600_000, classify, maxAttempts: 3 }).catch((e: unknown) => e);
    await clock.advance(60_000);
    expect(await result).toMatchObject({ code: 'NODE_UNREACHABLE' });
    expect(calls).toHaveLength(3);
  });

  it('never retries a TypeError, whatever the classifier says', async () => {
    const clock = new FakeClock();
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    const { calls, fn } = failing(clock, [bug]);
    await expect(retrying(fn, { clock, deadline: clock.now() + 60_000, classify: () => 'anything' })).rejects.toBe(bug);
    expect(calls).toHaveLength(1);
  });
});
