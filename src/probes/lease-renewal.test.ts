import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type LeaseRenewalValue } from './lease-renewal.js';

let t: ProbeTester;
afterEach(async () => t.close());

const CP = { 'node-role.kubernetes.io/control-plane': '' };

/** Every node renews every 10 s (40 s leases), `late(node)` ms later than that. */
async function renewFor(ms: number, nodes: string[], late: (node: string) => number) {
  const next = new Map(nodes.map((n) => [n, t.clock.now() + 10_000 + late(n)]));
  const until = t.clock.now() + ms;
  while (t.clock.now() < until) {
    await t.advance(500);
    for (const [n, at] of next)
      if (at <= t.clock.now()) {
        t.renewLease(n, at, 40);
        next.set(n, at + 10_000 + late(n));
      }
  }
}

describe('lease-renewal', () => {
  it('is ok while renewals come on time, and names each pool with its percentiles', async () => {
    t = new ProbeTester();
    t.putNode('cp-1', { labels: CP });
    const workers = ['w-1', 'w-2', 'w-3'];
    for (const n of workers) t.putNode(n);
    for (const n of ['cp-1', ...workers]) t.renewLease(n, t.clock.now(), 40);
    const run = t.start(probe, { minSamples: 5 });
    await renewFor(90_000, ['cp-1', ...workers], () => 0);
    const r = await run.until((x) => x.status === 'ok' && (x.value as LeaseRenewalValue).pools.some((p) => p.samples >= 5));
    const v = r.value as LeaseRenewalValue;
    expect(v.pools.map((p) => p.pool)).toEqual(['control-plane', 'workers']);
    const w = v.pools.find((p) => p.pool === 'workers')!;
    expect(w.nodes).toBe(3);
    expect(w.p99Ms).toBe(0);
    expect(r.detail).toMatch(/^workers: p99 0ms late/);
  });

  it('is violated when a pool renews later than maxLateness at p99, naming the latest nodes; the other pool stays out of it', async () => {
    t = new ProbeTester();
    t.putNode('cp-1', { labels: CP });
    const workers = ['w-1', 'w-2', 'w-3', 'w-4'];
    for (const n of workers) t.putNode(n);
    for (const n of ['cp-1', ...workers]) t.renewLease(n, t.clock.now(), 40);
    const run = t.start(probe, { maxLateness: '5s', minSamples: 10, window: '2m' });
    // an overloaded apiserver: every worker's renewal 8 s late, w-3's 12 s
    await renewFor(120_000, ['cp-1', ...workers], (n) => (n === 'w-3' ? 12_000 : n === 'cp-1' ? 0 : 8_000));
    const v = await run.until(
      (x) => x.status === 'violated' && (x.value as LeaseRenewalValue).pools.some((p) => p.pool === 'workers' && p.samples >= 10),
    );
    const pools = (v.value as LeaseRenewalValue).pools;
    const w = pools.find((p) => p.pool === 'workers')!;
    expect(w.p99Ms).toBeGreaterThanOrEqual(12_000);
    expect(w.p99Ms).toBeLessThanOrEqual(12_100);
    expect(w.p50Ms).toBeGreaterThanOrEqual(8_000);
    expect(w.p50Ms).toBeLessThanOrEqual(8_100);
    expect(w.p90Ms).toBeGreaterThanOrEqual(w.p50Ms);
    expect(w.p90Ms).toBeLessThanOrEqual(w.p99Ms);
    expect(w.latest[0]).toEqual({ node: 'w-3', latenessMs: 12_000 });
    expect(pools.find((p) => p.pool === 'control-plane')!.p99Ms).toBe(0);
    expect(v.detail).toMatch(
      /^workers: (.+ late and not renewed yet; )?p99 12(\.\d+)?s late \(p50 8(\.\d+)?s, p90 \d+(\.\d+)?s, max 12s, \d+ renewals; latest w-3\)$/,
    );
  });

  it("groups by poolLabel when given, and judges no pool's percentiles before it has minSamples renewals", async () => {
    t = new ProbeTester();
    t.putNode('a-1', { labels: { pool: 'a' } });
    t.putNode('b-1', { labels: { pool: 'b' } });
    for (const n of ['a-1', 'b-1']) t.renewLease(n, t.clock.now(), 40);
    const run = t.start(probe, { poolLabel: 'pool', minSamples: 50, maxLateness: '1s' });
    // late, yet within maxLateness each time, so no renewal was ever overdue by more
    await renewFor(60_000, ['a-1', 'b-1'], () => 900);
    const r = await run.until((x) => (x.value as LeaseRenewalValue | null)?.pools.length === 2);
    expect(r.status).toBe('ok');
    expect(r.detail).toMatch(/^too few renewals yet \(a \d, b \d; 50 needed\)$/);
  });

  it('is violated as soon as a renewal is overdue by more than maxLateness, before it comes (a kubelet that stops renewing)', async () => {
    t = new ProbeTester();
    for (const n of ['w-1', 'w-2']) {
      t.putNode(n);
      t.renewLease(n, t.clock.now(), 40);
    }
    const run = t.start(probe, { minSamples: 50, maxLateness: '5s' });
    await renewFor(30_000, ['w-1', 'w-2'], () => 0);
    expect(run.last()!.status).toBe('ok');
    // w-2's kubelet stops: its last renewal was at most 10 s ago, so it is due within 10 s and overdue by 5 s within 15 s
    const stoppedAt = t.clock.now();
    t.renewLease('w-1', stoppedAt, 40);
    await renewFor(20_000, ['w-1'], () => 0);
    const v = run.readings.find((x) => x.status === 'violated')!;
    expect(v).toBeDefined();
    const w = (v.value as LeaseRenewalValue).pools.find((p) => p.pool === 'workers')!;
    expect(w.overdue.map((o) => o.node)).toEqual(['w-2']);
    expect(w.overdue[0]!.overdueMs).toBeGreaterThan(5_000);
    expect(w.overdue[0]!.overdueMs).toBeLessThanOrEqual(5_100);
    expect(v.at - stoppedAt).toBeLessThanOrEqual(15_100);
    expect(v.detail).toMatch(/^workers: w-2 5(\.\d+)?s late and not renewed yet$/);
    // and ok again once it renews, its percentiles still unjudged (minSamples 50)
    t.renewLease('w-2', t.clock.now(), 40);
    const ok = await run.until((x) => x.status === 'ok' && x.at > v.at);
    expect((ok.value as LeaseRenewalValue).pools[0]!.overdue).toEqual([]);
    expect(ok.detail).toMatch(/^too few renewals yet \(workers \d+; 50 needed\)$/);
  });

  it('forgets renewals older than the window: a pool that recovered reads ok again', async () => {
    t = new ProbeTester();
    for (const n of ['w-1', 'w-2']) {
      t.putNode(n);
      t.renewLease(n, t.clock.now(), 40);
    }
    const run = t.start(probe, { minSamples: 3, window: '1m', maxLateness: '5s' });
    await renewFor(60_000, ['w-1', 'w-2'], () => 9_000);
    await run.until((x) => x.status === 'violated');
    await renewFor(150_000, ['w-1', 'w-2'], () => 0);
    const ok = await run.until((x) => x.status === 'ok' && (x.value as LeaseRenewalValue).pools[0]!.maxMs === 0);
    expect(ok.detail).toMatch(/^workers: p99 0ms late \(p50 0ms, p90 0ms, max 0ms, \d+ renewals\)$/);
  });
});
