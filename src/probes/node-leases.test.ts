import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import probe from './node-leases.js';

let t: ProbeTester;
afterEach(async () => t.close());

function cluster() {
  t = new ProbeTester();
  for (const n of ['node-1', 'node-2', 'node-3']) {
    t.putNode(n);
    t.renewLease(n);
  }
}

describe('node-leases', () => {
  it('reads unknown at once, then ok when every lease is fresh', async () => {
    cluster();
    const run = t.start(probe, { staleAfter: '5s' });
    await t.advance(0);
    expect(run.readings[0]).toMatchObject({ status: 'unknown' });
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('3/3 leases fresh (oldest 0ms)');
  });

  it('turns violated the moment a lease passes staleAfter, without any event, and ok again on renewal', async () => {
    cluster();
    const lastRenewal = t.clock.now();
    const run = t.start(probe, { staleAfter: '5s', nodes: { names: ['node-1', 'node-2'] } });
    await run.until((r) => r.status === 'ok');
    // node-2 keeps renewing, node-1 has stopped
    for (let i = 1; i <= 3; i++) {
      await t.advance(2000);
      t.renewLease('node-2');
    }
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at - lastRenewal).toBe(5001);
    expect(v.detail).toBe('1/2 leases stale: node-1 5.0s');
    expect((v.value as { stale: string[] }).stale).toEqual(['node-1']);
    const renewedAt = t.clock.now();
    t.renewLease('node-1');
    const back = await run.until((r) => r.status === 'ok');
    expect(back.at).toBe(renewedAt);
  });

  it('judges a storm of renewals in batches of a quarter second, the last batch with every renewal in it', async () => {
    t = new ProbeTester();
    const names = Array.from({ length: 40 }, (_, i) => `node-${String(i).padStart(2, '0')}`);
    for (const n of names) {
      t.putNode(n);
      t.renewLease(n);
    }
    const run = t.start(probe, { staleAfter: '5s' });
    await run.until((r) => r.status === 'ok');
    const v = await run.until((r) => r.status === 'violated' && (r.value as { stale: string[] }).stale.length === 40, 10_000);
    // the 40 come back one every 10 ms: 400 ms of renewals, each of which changes the stale set
    const before = run.readings.length;
    const from = t.clock.now();
    for (const n of names) {
      t.renewLease(n);
      await t.advance(10);
    }
    const ok = await run.until((r) => r.status === 'ok', 1_000);
    const during = run.readings.slice(before);
    expect(v.detail).toContain('40/40 leases stale');
    expect(during.length).toBeLessThanOrEqual(3);
    expect(ok.at - from).toBeLessThanOrEqual(400 + 250);
    expect(ok.detail).toMatch(/^40\/40 leases fresh/);
    expect((ok.value as { stale: string[] }).stale).toEqual([]);
  });

  it('reads at once when the stale nodes change and their count does not', async () => {
    t = new ProbeTester();
    const s = t.clock.now();
    for (const n of ['node-1', 'node-2', 'node-3']) t.putNode(n);
    t.renewLease('node-1', s - 10_000);
    t.renewLease('node-3');
    const run = t.start(probe, { staleAfter: '5s' });
    await t.advance(100);
    t.renewLease('node-2');
    const stale = (r: { value: unknown }) => (r.value as { stale: string[] } | null)?.stale.join(',');
    // node-3 turns stale at s + 5001 beside node-1; then node-1 renews while node-2 turns stale: two stale all along
    const two = await run.until((r) => stale(r) === 'node-1,node-3', 6_000);
    expect(two.at).toBe(s + 5001);
    await t.advance(50);
    t.renewLease('node-1');
    const swapped = await run.until((r) => stale(r) === 'node-2,node-3', 1_000);
    // judged with the renewal a quarter second after the last judgement, not at the next once-a-second refresh
    expect(swapped.at).toBe(s + 5001 + 250);
    expect(swapped.detail).toMatch(/^2\/3 leases stale: node-2 5\.\ds, node-3 5\.\ds$/);
    // node-2 renewing yet still stale is judged each time and changes nothing: no reading but the once-a-second refresh
    const settled = run.readings.length;
    for (let i = 0; i < 3; i++) {
      await t.advance(250);
      t.renewLease('node-2', t.clock.now() - 6_000);
    }
    await t.advance(250);
    expect(run.readings.slice(settled).map(stale)).toEqual(run.readings.length > settled ? ['node-2,node-3'] : []);
    expect(run.readings.length - settled).toBeLessThanOrEqual(1);
  });

  it("uses each lease's own duration when staleAfter is not given, and a node without a lease is stale", async () => {
    cluster();
    t.putNode('node-4');
    const run = t.start(probe, {});
    const v = await run.until((r) => r.status === 'violated');
    expect(v.detail).toBe('1/4 leases stale: node-4 (no lease)');
    const renewed = t.clock.now();
    for (const n of ['node-1', 'node-2', 'node-3', 'node-4']) t.renewLease(n);
    await run.until((r) => r.status === 'ok');
    await t.advance(renewed + 7_900 - t.clock.now());
    expect(run.last()?.status).toBe('ok');
    await run.until((r) => r.status === 'violated', 1_000);
  });

  it('selects workers by inventory role and cluster labels', async () => {
    cluster();
    t.putNode('cp-1', { labels: { 'node-role.kubernetes.io/control-plane': '' } });
    const run = t.start(probe, { nodes: 'workers', staleAfter: '5s' });
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('3/3 leases fresh (oldest 0ms)');
  });

  it('goes unknown when the apiserver stops and recovers when it is back', async () => {
    cluster();
    const run = t.start(probe, { staleAfter: '30s' });
    await run.until((r) => r.status === 'ok');
    t.api.stop();
    const u = await run.until((r) => r.status === 'unknown', 5_000);
    expect(u.detail).toMatch(/apiserver unreachable/);
    await t.advance(10_000);
    t.api.start();
    await run.until((r) => r.status === 'ok', 5_000);
  });
});
