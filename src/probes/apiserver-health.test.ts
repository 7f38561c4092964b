import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type ApiserverHealth } from './apiserver-health.js';

let t: ProbeTester;
afterEach(async () => t.close());

describe('apiserver-health', () => {
  it('is ok when /readyz and /livez answer 200, violated when readyz fails or the apiserver is gone', async () => {
    t = new ProbeTester();
    let readyz = 200;
    t.kube.rawHandler = (path) => ({ status: path === '/readyz' ? readyz : 200, body: 'ok' });
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.value).toEqual({ readyz: 200, livez: 200, latencyMs: 0 });
    expect(ok.detail).toBe('readyz 200, livez 200, 0ms');
    readyz = 500;
    const bad = await run.until((r) => r.status === 'violated');
    expect(bad.detail).toBe('readyz 500, livez 200, 0ms');
    readyz = 200;
    await run.until((r) => r.status === 'ok');
    t.api.stop();
    const gone = await run.until((r) => r.status === 'violated');
    expect((gone.value as ApiserverHealth).error).toMatch(/ECONNREFUSED/);
    expect(gone.detail).toMatch(/^apiserver does not answer/);
  });

  it('can read an unreachable apiserver as unknown, and flags slow answers', async () => {
    t = new ProbeTester();
    t.kube.rawHandler = async () => {
      await t.clock.sleep(1500);
      return { status: 200, body: 'ok' };
    };
    const run = t.start(probe, { unreachable: 'unknown', interval: '1s' });
    const slow = await run.until((r) => r.status === 'violated');
    expect(slow.detail).toBe('readyz 200, livez 200, 1.5s (slower than 1s)');
    t.api.stop();
    await run.until((r) => r.status === 'unknown');
  });

  it('asks at its interval and repeats an unchanged reading at most once a second', async () => {
    t = new ProbeTester();
    t.kube.rawHandler = () => ({ status: 200, body: 'ok' });
    const run = t.start(probe, { interval: '200ms' });
    await t.advance(3000);
    expect(t.kube.rawCalls.filter((p) => p === '/readyz').length).toBeGreaterThanOrEqual(15);
    expect(run.readings.length).toBeLessThanOrEqual(4);
  });
});
