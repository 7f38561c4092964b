import { describe, expect, it } from 'vitest';
import evictionForecast, { type EvictionForecastValue } from './eviction-forecast.js';
import nodeLeases from './node-leases.js';
import nodeReady from './node-ready.js';
import noexecuteTaints from './noexecute-taints.js';

/** What report.json keeps of the readings of the probes every run starts (its observers). */
describe("what a run report keeps of each observer's readings", () => {
  const many = (n: number, of: (i: number) => string) => Array.from({ length: n }, (_, i) => of(i + 1));

  it('node-leases: the first 20 stale nodes, not every lease age', () => {
    const stale = many(30, (i) => `node-${i}`);
    const nodes = stale.map((name) => ({ name, ageMs: 60_000, stale: true }));
    expect(nodeLeases.meta.report!({ nodes, stale })).toEqual({ stale: stale.slice(0, 20) });
  });

  it('node-ready: the counts and the first 20 nodes not Ready, with their status', () => {
    const nodes = [
      { name: 'cp-1', status: 'True', transitions: 0 },
      ...many(25, (i) => `node-${i}`).map((name) => ({ name, status: 'Unknown', transitions: 1 })),
    ];
    const r = nodeReady.meta.report!({ ready: 1, notReady: 25, total: 26, nodes, flapping: [] }) as {
      ready: number;
      total: number;
      notReady: string[];
    };
    expect(r.ready).toBe(1);
    expect(r.total).toBe(26);
    expect(r.notReady).toHaveLength(20);
    expect(r.notReady[0]).toBe('node-1 Unknown');
  });

  it('noexecute-taints: the first 20 taints as "node key"', () => {
    const tainted = many(22, (i) => `node-${i}`).map((node) => ({ node, key: 'node.kubernetes.io/unreachable', addedAt: null }));
    const r = noexecuteTaints.meta.report!({ tainted, nodes: 22 }) as { tainted: string[] };
    expect(r.tainted).toHaveLength(20);
    expect(r.tainted[0]).toBe('node-1 node.kubernetes.io/unreachable');
  });

  it('eviction-forecast: the earliest eviction at an ISO time, the pods at risk, and why evictions are frozen', () => {
    const at = Date.UTC(2026, 0, 1, 0, 5, 0);
    const value = {
      earliestEviction: { at, pod: 'default/web-1', node: 'node-2', inMs: 30_000 },
      atRisk: 12,
      frozen: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)',
    } as unknown as EvictionForecastValue;
    expect(evictionForecast.meta.report!(value)).toEqual({
      earliestEviction: { at: '2026-01-01T00:05:00.000Z', pod: 'default/web-1', node: 'node-2' },
      atRisk: 12,
      frozen: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)',
    });
    expect(evictionForecast.meta.report!({ ...value, earliestEviction: null, frozen: null })).toEqual({
      earliestEviction: null,
      atRisk: 12,
      frozen: null,
    });
  });
});
