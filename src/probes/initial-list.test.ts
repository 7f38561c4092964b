import { afterEach, describe, expect, it } from 'vitest';
import type { Probe, Reading } from '../contract/probe.js';
import { paths } from '../kube/resources.js';
import { type ProbeRun, ProbeTester } from '../testing/probe-tester.js';
import endpointsStability from './endpoints-stability.js';
import evictionForecast from './eviction-forecast.js';
import nodeLeases from './node-leases.js';
import nodeReady from './node-ready.js';
import noexecuteTaints from './noexecute-taints.js';
import podDeletions from './pod-deletions.js';

/**
 * A large cluster's initial list comes in pages, slowly, and a page can fail half-way. Until every page of every
 * watch a probe reads has arrived, what the probe has seen is a part of the cluster: it must read unknown, never
 * ok. Here the one bad node is on the last page, so a probe that judged a partial list would say ok.
 */

let t: ProbeTester;
afterEach(async () => t.close());

const START = 1_000_000;
const PAGE = 2;
const PAGE_MS = 3000;
const HEALTHY = ['cp-1', 'node-1', 'node-2', 'fleet-1', 'fleet-2', 'fleet-3', 'fleet-4'];

function bigSlowCluster() {
  t = new ProbeTester({ start: START, watch: { pageSize: PAGE, staleAfterMs: 60_000, pingAfterMs: 60_000 } });
  for (const n of HEALTHY) {
    t.putNode(n);
    t.renewLease(n);
  }
  // node-3, listed last: silent for two minutes, NotReady, tainted NoExecute
  const since = START - 120_000;
  t.putNode('node-3', {
    ready: 'Unknown',
    heartbeat: since,
    transition: since + 40_000,
    taints: [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: since + 45_000 }],
  });
  t.renewLease('node-3', since);
  for (const n of [...HEALTHY, 'node-3']) t.putPod('default', `web-${n}`, { node: n, labels: { app: 'web' } });
  t.api.put(paths.services, { metadata: { namespace: 'default', name: 'web' }, spec: { selector: { app: 'web' } } });
  t.api.put(paths.endpoints, { metadata: { namespace: 'default', name: 'web' }, subsets: [{ addresses: [{ ip: '10.0.0.1' }] }] });
  t.api.listPageDelayMs = PAGE_MS;
  // the connection drops on the second page of the first list: the list starts over
  t.api.failPages.add(PAGE);
}

/** When the last page of the last list the probe waits for was served (the probe can see it all from then on). */
function lastPageServedAt(): number {
  const lists = t.api.calls.filter((c) => c.kind === 'list');
  return Math.max(...lists.map((c) => c.at)) + PAGE_MS;
}

const cases: { probe: Probe; params: Record<string, unknown>; first: Reading['status'] }[] = [
  { probe: nodeReady, params: {}, first: 'violated' },
  { probe: nodeLeases, params: {}, first: 'violated' },
  { probe: noexecuteTaints, params: {}, first: 'violated' },
  { probe: evictionForecast, params: { margin: '10m' }, first: 'violated' },
  { probe: podDeletions, params: {}, first: 'ok' },
  { probe: endpointsStability, params: {}, first: 'ok' },
];

/** The first reading that is not unknown: after at least one unknown, and the expected verdict. */
async function firstVerdict(run: ProbeRun, expected: Reading['status']): Promise<Reading> {
  const first = await run.until((r) => r.status !== 'unknown', 300_000, 250);
  const before = run.readings.slice(0, run.readings.indexOf(first));
  expect(before.length).toBeGreaterThan(0);
  expect(before.every((r) => r.status === 'unknown')).toBe(true);
  expect(first.status).toBe(expected);
  return first;
}

/** Half a minute on, the probe has never said the opposite of its verdict (ok for a bad cluster, or violated). */
async function neverTheOtherVerdict(run: ProbeRun, verdict: Reading['status']): Promise<void> {
  await t.advance(30_000);
  if (verdict === 'violated') expect(run.readings.filter((r) => r.status === 'ok')).toEqual([]);
  else expect(run.readings.filter((r) => r.status === 'violated')).toEqual([]);
}

describe('probes over a slow, paginated, interrupted initial list', () => {
  for (const c of cases)
    it(`${c.probe.meta.id}: unknown until every page is in, then ${c.first}; never ok before`, async () => {
      bigSlowCluster();
      const run = t.start(c.probe, c.params);
      const first = await firstVerdict(run, c.first);
      // more than one page per list, and the failed page made a list start over
      expect(first.at).toBeGreaterThanOrEqual(lastPageServedAt());
      expect(first.at - START).toBeGreaterThanOrEqual(5 * PAGE_MS);
      expect(t.api.calls.some((x) => x.kind === 'list' && x.continue)).toBe(true);
      await neverTheOtherVerdict(run, c.first);
    });
});

describe('probes over a slow, interrupted watch-list (initial events streamed, apiservers 1.27+)', () => {
  /** When the last stream of initial events of every resource the probe watches had sent its last object. */
  function lastStreamServedAt(): number {
    const objects = new Map<string, number>([
      [paths.nodes, HEALTHY.length + 1],
      [paths.nodeLeases, HEALTHY.length + 1],
      [paths.pods, HEALTHY.length + 1],
      [paths.services, 1],
      [paths.endpoints, 1],
    ]);
    const last = new Map<string, number>();
    for (const c of t.api.calls) if (c.kind === 'watch-list' && c.path) last.set(c.path, c.at);
    return Math.max(...[...last].map(([path, at]) => at + (objects.get(path) ?? 0) * PAGE_MS));
  }

  for (const c of cases)
    it(`${c.probe.meta.id}: unknown until every initial event is in, then ${c.first}; never ok before; no list`, async () => {
      bigSlowCluster();
      t.api.failPages.clear();
      t.api.watchList = 'on';
      // every stream is cut once half-way: what came before the cut is not kept
      t.clock.setTimer(4 * PAGE_MS + 100, () => t.api.dropWatches('connection reset by peer'));
      const run = t.start(c.probe, c.params);
      const first = await firstVerdict(run, c.first);
      expect(first.at).toBeGreaterThanOrEqual(lastStreamServedAt());
      expect(t.api.calls.filter((x) => x.kind === 'list')).toEqual([]);
      // each resource's first stream was cut and a second one read it all
      const streams = t.api.calls.filter((x) => x.kind === 'watch-list');
      for (const path of new Set(streams.map((s) => s.path)))
        expect(streams.filter((s) => s.path === path).length, path).toBeGreaterThanOrEqual(2);
      await neverTheOtherVerdict(run, c.first);
    });
});
