import { describe, expect, it } from 'vitest';
import { FakeClock } from 'kube-runbook/internal/testing/fake-clock.js';
import { firstRenewOffset, jittered, leaseExpired, nextRenewDelay, renewInterval, retryDelay, statusDue, watchBackoff } from './timing.js';

describe('lease renewal timing', () => {
  it('renews every quarter of the lease duration, like the kubelet', () => {
    expect(renewInterval(40_000)).toBe(10_000);
    expect(renewInterval(8_000)).toBe(2_000);
  });

  it('jitters the period upwards by at most 4 %', () => {
    expect(nextRenewDelay(40_000, 0)).toBe(10_000);
    expect(nextRenewDelay(40_000, 0.5)).toBe(10_200);
    expect(nextRenewDelay(40_000, 0.999999)).toBeLessThanOrEqual(10_400);
    expect(jittered(1000, -3)).toBe(1000);
    expect(jittered(1000, Number.NaN)).toBe(1000);
    expect(jittered(1000, 7)).toBeLessThanOrEqual(1040);
  });

  it('retries a failed renewal from 200 ms, doubling, never later than the renew interval', () => {
    const d = [1, 2, 3, 4, 5, 6, 7, 8].map((f) => retryDelay(f, 8_000));
    expect(d).toEqual([200, 400, 800, 1600, 2000, 2000, 2000, 2000]);
    expect(retryDelay(0, 40_000)).toBe(200);
    expect(retryDelay(10, 40_000)).toBe(10_000);
  });

  it('sees a lease as expired only once renewTime + duration has passed', () => {
    expect(leaseExpired(1000, 8000, 9000)).toBe(false);
    expect(leaseExpired(1000, 8000, 9001)).toBe(true);
  });

  it('keeps a node that renews on time from ever looking expired, with the worst jitter (fake clock)', async () => {
    const clock = new FakeClock();
    const leaseDuration = 8_000;
    let renewedAt = clock.now();
    let worstGap = 0;
    let running = true;
    const loop = (async () => {
      while (running) {
        await clock.sleep(nextRenewDelay(leaseDuration, 0.999999));
        worstGap = Math.max(worstGap, clock.now() - renewedAt);
        expect(leaseExpired(renewedAt, leaseDuration, clock.now())).toBe(false);
        renewedAt = clock.now();
      }
    })();
    await clock.advance(60_000);
    running = false;
    await clock.advance(3_000);
    await loop;
    expect(worstGap).toBeGreaterThanOrEqual(2_000);
    expect(worstGap).toBeLessThanOrEqual(2_080);
  });
});

describe('NodeStatus timing', () => {
  it('posts at once when something changed or nothing was posted yet', () => {
    expect(statusDue({ lastPostMs: undefined, nowMs: 5, reportFrequencyMs: 60_000, changed: false })).toBe(true);
    expect(statusDue({ lastPostMs: 0, nowMs: 5, reportFrequencyMs: 60_000, changed: true })).toBe(true);
  });

  it('otherwise posts once per report frequency', () => {
    expect(statusDue({ lastPostMs: 0, nowMs: 59_999, reportFrequencyMs: 60_000, changed: false })).toBe(false);
    expect(statusDue({ lastPostMs: 0, nowMs: 60_000, reportFrequencyMs: 60_000, changed: false })).toBe(true);
  });
});

describe('fleet spreading and watch back-off', () => {
  it('spreads the first renewals of a fleet evenly over one interval', () => {
    const offsets = Array.from({ length: 4 }, (_, i) => firstRenewOffset(i, 4, 40_000));
    expect(offsets).toEqual([0, 2500, 5000, 7500]);
    expect(firstRenewOffset(0, 1, 40_000)).toBe(0);
  });

  it('backs off a broken watch from 800 ms to 30 s', () => {
    expect([1, 2, 3, 6, 7, 20].map((f) => watchBackoff(f))).toEqual([800, 1600, 3200, 25_600, 30_000, 30_000]);
  });
});
