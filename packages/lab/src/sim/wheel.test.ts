import { describe, expect, it } from 'vitest';
import { FakeClock } from 'kube-runbook/internal/testing/fake-clock.js';
import { WheelClock } from './wheel.js';

describe('WheelClock', () => {
  it('fires each timer at its tick, never early and at most one tick late', async () => {
    const base = new FakeClock(0);
    const wheel = new WheelClock(base, 20);
    const fired: [string, number][] = [];
    wheel.setTimer(2000, () => fired.push(['a', base.now()]));
    wheel.setTimer(2005, () => fired.push(['b', base.now()]));
    wheel.setTimer(2021, () => fired.push(['c', base.now()]));
    await base.advance(1999);
    expect(fired).toEqual([]);
    await base.advance(100);
    expect(fired).toEqual([
      ['a', 2000],
      ['b', 2020],
      ['c', 2040],
    ]);
  });

  it('arms one underlying timer for all the nodes due in the same tick', async () => {
    const base = new FakeClock(0);
    const wheel = new WheelClock(base, 20);
    let woke = 0;
    // 180 nodes renewing every 2 s with up to 4 % jitter, spread over the interval
    for (let i = 0; i < 180; i++) void wheel.sleep(2000 + ((i * 7) % 80)).then(() => woke++);
    expect(wheel.pending).toBe(180);
    expect(wheel.armed).toBeLessThanOrEqual(5);
    expect(base.pending).toBe(wheel.armed);
    await base.advance(2100);
    expect(woke).toBe(180);
    expect(wheel.pending).toBe(0);
  });

  it('drops a cancelled timer and rejects a sleep whose signal aborts', async () => {
    const base = new FakeClock(0);
    const wheel = new WheelClock(base, 20);
    let fired = 0;
    const cancel = wheel.setTimer(100, () => fired++);
    const stop = new AbortController();
    const slept = wheel.sleep(100, stop.signal);
    cancel();
    stop.abort(new Error('stopped'));
    await expect(slept).rejects.toThrow('stopped');
    await base.advance(200);
    expect(fired).toBe(0);
    expect(wheel.pending).toBe(0);
  });

  it('keeps the wall clock of its base', () => {
    const base = new FakeClock(12_345);
    expect(new WheelClock(base).now()).toBe(12_345);
  });
});
