import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import { byCodeUnit } from '../core/order.js';
import { type ForecastNode, type ForecastStore, type PodGroup, forecast, groupPods, isFailing, lastHeartbeatOf } from './forecast.js';
import { type ForecastFeed, forecastFeed } from './feed.js';
import { NODE_LEASE_NAMESPACE, paths, watchSpecs, zoneOf } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import { parseKubeVersion, versionDefaults } from '../kube/versions.js';

let t: ProbeTester;
afterEach(async () => t.close());

const SILENT_AFTER = 4_000;
const settings = versionDefaults(parseKubeVersion('v1.37.2'));
const ZONE = 'topology.kubernetes.io/zone';
const EXCLUDED = 'node.kubernetes.io/exclude-disruption';

/** When the taint on a node was first seen, as the probe tracks it: here a number made from its name. */
const sinceOf = (name: string) => 1_000 * name.charCodeAt(0) + name.length;

/** The failing nodes as the feed hands them, with every field the expected ones have. */
const rowsOf = (nodes: readonly ForecastNode[]) =>
  nodes.map((n) => ({
    name: n.name,
    zone: n.zone,
    excluded: n.excluded === true,
    created: n.created,
    leaseRenew: n.leaseRenew,
    ready: n.ready && { status: n.ready.status, heartbeat: n.ready.heartbeat, transition: n.ready.transition },
    taints: n.taints,
    taintedSince: n.taintedSince,
  }));

/** Groups in the order of their first keys (the order a node's groups come in does not matter). */
const inOrder = (gs: readonly PodGroup[]) => [...gs].sort((a, b) => byCodeUnit(a.keys[0]!, b.keys[0]!));

async function setup(namespaces?: ReadonlySet<string>) {
  const nodes = t.kube.watches.watch(watchSpecs.nodes());
  const leases = t.kube.watches.watch(watchSpecs.nodeLeases());
  const pods = t.kube.watches.watch(watchSpecs.pods());
  await t.clock.runUntil(() => [nodes, leases, pods].every((w) => w.freshness().synced), 10_000, 10);
  const feed = forecastFeed(nodes, leases, pods, { namespaces, taintedSince: sinceOf });
  /** The same, worked out from the watches' stores in one pass over every node, lease and pod. */
  const expected = (now: number) => {
    const renew = (name: string) => leases.store.get(`${NODE_LEASE_NAMESPACE}/${name}`)?.renewTime;
    const all = [...nodes.store.values()];
    const failing = all.filter((n) => isFailing(n, renew(n.name), now, SILENT_AFTER));
    const healthy = new Map<string, number>();
    for (const n of all)
      if (!(EXCLUDED in n.labels)) healthy.set(zoneOf(n.labels), (healthy.get(zoneOf(n.labels)) ?? 0) + (failing.includes(n) ? 0 : 1));
    // every node not silent, healthy or failing and still heartbeating, falls silent at its last heartbeat + silentAfter
    const beats = all
      .map((n) => lastHeartbeatOf(n, renew(n.name)))
      .filter((b) => b !== undefined && now - b <= SILENT_AFTER)
      .map((b) => b! + SILENT_AFTER + 1);
    const podsOf = (name: string) =>
      inOrder(
        groupPods(
          [...pods.store]
            .filter(([, p]) => p.nodeName === name && p.deletionTimestamp === undefined && (!namespaces || namespaces.has(p.namespace)))
            .map(([key, p]) => ({ key, node: name, tolerations: p.tolerations })),
        ),
      );
    return {
      // what the forecast reads of a node, by name
      failing: failing
        .map((n) => ({
          name: n.name,
          zone: zoneOf(n.labels),
          excluded: EXCLUDED in n.labels,
          created: n.created,
          leaseRenew: renew(n.name),
          ready: n.ready && { status: n.ready.status, heartbeat: n.ready.heartbeat, transition: n.ready.transition },
          taints: n.taints,
          // asked for only where the forecast reads it: on a node with the controller's taint
          taintedSince: n.taints.some((x) => x.effect === 'NoExecute' && [UNREACHABLE, NOT_READY].includes(x.key))
            ? sinceOf(n.name)
            : undefined,
        }))
        .sort((a, b) => byCodeUnit(a.name, b.name)),
      healthy: Object.fromEntries([...healthy].sort()),
      firstSilence: Math.min(Infinity, ...beats),
      pods: Object.fromEntries(all.map((n) => [n.name, podsOf(n.name)])),
      failingPods: Object.fromEntries(failing.map((n) => [n.name, podsOf(n.name)])),
    };
  };
  const actual = (now: number) => {
    const f = feed.fleet(now, SILENT_AFTER);
    return {
      failing: rowsOf(f.nodes),
      healthy: Object.fromEntries([...f.healthy].sort()),
      firstSilence: f.firstSilence,
      pods: Object.fromEntries([...nodes.store.values()].map((n) => [n.name, inOrder(feed.podsOn(n.name))])),
      // what the forecast reads: the pods handed with each failing node
      failingPods: Object.fromEntries(f.nodes.map((n) => [n.name, inOrder(n.pods ?? [])])),
    };
  };
  return { feed, expected, actual };
}

describe('forecast feed', () => {
  it('keeps, from the watch events, what a pass over every node, lease and pod gives', async () => {
    t = new ProbeTester();
    for (const n of ['a-1', 'a-2', 'b-1']) {
      t.putNode(n, { labels: { [ZONE]: n.slice(0, 1) } });
      t.renewLease(n);
      t.putPod('default', `web-${n}`, { node: n });
    }
    const { feed, expected, actual } = await setup(new Set(['default', 'kube-system']));
    const seen = { failing: 0, healthy: 0, groups: 0 };
    // the number that changes with the set of failing nodes, and that set, at the last check; how often it stayed
    let last: { set: number; names: string } | undefined;
    let sameSets = 0;
    const check = async (what: string) => {
      await t.advance(50);
      const e = expected(t.clock.now());
      expect(actual(t.clock.now()), what).toEqual(e);
      const names = e.failing.map((n) => n.name).join();
      const set = feed.fleet(t.clock.now(), SILENT_AFTER).failingSet;
      // the same number: the same set (a new number for the same set only costs a reading)
      if (last && set === last.set) expect(names, `${what}: the failing set number`).toBe(last.names);
      if (last && set === last.set) sameSets++;
      last = { set, names };
      if (e.failing.length) seen.failing++;
      if (Object.values(e.healthy).some((n) => n > 0)) seen.healthy++;
      if (Object.values(e.pods).some((gs) => gs.length > 1)) seen.groups++;
    };
    await check('at the start');
    expect(feed.fleet(t.clock.now(), SILENT_AFTER).nodes.length).toBe(0);

    // a seeded walk through the events a cluster sends
    let seed = 7;
    const rand = (n: number) => {
      // mulberry32
      seed = (seed + 0x6d2b79f5) >>> 0;
      let x = Math.imul(seed ^ (seed >>> 15), seed | 1);
      x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
      return Math.floor((((x ^ (x >>> 14)) >>> 0) / 4294967296) * n);
    };
    const names = ['a-1', 'a-2', 'a-3', 'b-1', 'b-2', 'c-1'];
    const podKeys = new Set(['default/web-a-1', 'default/web-a-2', 'default/web-b-1']);
    const tolerations = [
      undefined,
      [],
      [{ operator: 'Exists' }],
      [{ key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
      [{ key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 60 }],
      [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' }],
    ];
    for (let step = 0; step < 300; step++) {
      const n = names[rand(names.length)]!;
      const op = rand(10);
      let what: string;
      if (op === 0) {
        const labels: Record<string, string> = { [ZONE]: ['a', 'b', 'c'][rand(3)]! };
        if (rand(5) === 0) labels[EXCLUDED] = '';
        t.putNode(n, {
          labels,
          ready: (['True', 'True', 'Unknown', 'False'] as const)[rand(4)],
          heartbeat: t.clock.now() - rand(3) * 1000,
          taints: rand(4) === 0 ? [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }] : [],
        });
        what = `node ${n} put`;
      } else if (op === 1) {
        t.api.remove(paths.nodes, n);
        what = `node ${n} removed`;
      } else if (op <= 4) {
        t.renewLease(n);
        what = `lease ${n} renewed`;
      } else if (op === 5) {
        t.api.remove(paths.nodeLeases, `${NODE_LEASE_NAMESPACE}/${n}`);
        what = `lease ${n} removed`;
      } else if (op <= 7) {
        const ns = ['default', 'kube-system', 'other'][rand(3)]!;
        const name = `p-${rand(12)}`;
        t.putPod(ns, name, { node: rand(6) === 0 ? undefined : n, tolerations: tolerations[rand(tolerations.length)] });
        podKeys.add(`${ns}/${name}`);
        what = `pod put on ${n}`;
      } else if (op === 8) {
        const key = [...podKeys][rand(podKeys.size)];
        if (key && rand(2) === 0) t.terminatePod(key.split('/')[0]!, key.split('/')[1]!);
        else if (key) {
          t.api.remove(paths.pods, key);
          podKeys.delete(key);
        }
        what = `pod ${key} terminated or removed`;
      } else {
        await t.advance(500 + rand(5) * 1000);
        what = 'time passes';
      }
      await check(`step ${step}: ${what}`);
    }
    // the walk went through failing and healthy nodes alike, and nodes with pods of several tolerations
    expect(seen.failing).toBeGreaterThan(100);
    expect(seen.healthy).toBeGreaterThan(100);
    expect(seen.groups).toBeGreaterThan(100);
    expect(sameSets).toBeGreaterThan(50);
  });

  it("keeps a node's groups of pods as kinds of tolerations come and go, and as its Node goes and comes back", async () => {
    t = new ProbeTester();
    t.putNode('n-1', { labels: { [ZONE]: 'a' }, ready: 'Unknown' });
    t.putNode('n-2', { labels: { [ZONE]: 'a' }, ready: 'False' });
    const { feed, expected, actual } = await setup();
    const check = async (what: string, groups: number) => {
      await t.advance(50);
      const e = expected(t.clock.now());
      expect(actual(t.clock.now()), what).toEqual(e);
      expect(e.failingPods['n-1'], what).toHaveLength(groups);
    };
    const kinds = Array.from({ length: 6 }, (_, k) => [
      { key: `k-${k}`, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 60 * (k + 1) },
    ]);
    for (let k = 0; k < 6; k++) {
      t.putPod('default', `p-${k}`, { node: 'n-1', tolerations: kinds[k] });
      t.putPod('default', `q-${k}`, { node: 'n-1', tolerations: kinds[k] });
      await check(`${k + 1} kinds on n-1`, k + 1);
    }
    // its Node gone and back: the same groups
    t.api.remove(paths.nodes, 'n-1');
    await t.advance(50);
    expect(feed.fleet(t.clock.now(), SILENT_AFTER).nodes.map((n) => n.name)).toEqual(['n-2']);
    t.putNode('n-1', { labels: { [ZONE]: 'a' }, ready: 'Unknown' });
    await check('n-1 back', 6);
    // a pod's status changes (same group), one moves to n-2, groups go one by one
    t.putPod('default', 'p-0', { node: 'n-1', tolerations: kinds[0], ready: false });
    await check('a status changed', 6);
    t.putPod('default', 'q-0', { node: 'n-2', tolerations: kinds[0] });
    await check('q-0 on n-2', 6);
    for (let k = 0; k < 6; k++) {
      t.api.remove(paths.pods, `default/p-${k}`);
      if (k > 0) t.api.remove(paths.pods, `default/q-${k}`);
      await check(`kind ${k} gone`, 5 - k);
    }
    // the tolerations' numbers given again to new kinds while q-0's is still in use on n-2
    for (let k = 0; k < 3; k++)
      t.putPod('default', `r-${k}`, { node: 'n-1', tolerations: [{ operator: 'Exists', tolerationSeconds: k + 1 }] });
    await check('new kinds', 3);
  });

  it("hands the pods only of the nodes selected, and a failing node's new pods while nothing else changed", async () => {
    t = new ProbeTester();
    t.putNode('n-1', { labels: { [ZONE]: 'a' }, ready: 'Unknown' });
    t.putNode('n-2', { labels: { [ZONE]: 'a' }, ready: 'Unknown' });
    t.putPod('default', 'p-1', { node: 'n-1' });
    t.putPod('default', 'p-2', { node: 'n-2' });
    const nodes = t.kube.watches.watch(watchSpecs.nodes());
    const leases = t.kube.watches.watch(watchSpecs.nodeLeases());
    const pods = t.kube.watches.watch(watchSpecs.pods());
    await t.clock.runUntil(() => [nodes, leases, pods].every((w) => w.freshness().synced), 10_000, 10);
    const feed = forecastFeed(nodes, leases, pods, { podsOf: (n) => n === 'n-1', taintedSince: sinceOf });
    const podKeys = () =>
      Object.fromEntries(feed.fleet(t.clock.now(), SILENT_AFTER).nodes.map((n) => [n.name, (n.pods ?? []).flatMap((g) => g.keys)]));
    expect(podKeys()).toEqual({ 'n-1': ['default/p-1'], 'n-2': [] });
    // only pods change: the failing nodes are the same, their pods are not
    t.putPod('default', 'p-3', { node: 'n-1', tolerations: [{ operator: 'Exists' }] });
    t.putPod('default', 'p-4', { node: 'n-2' });
    await t.advance(50);
    expect(podKeys()).toEqual({ 'n-1': ['default/p-1', 'default/p-3'], 'n-2': [] });
    t.api.remove(paths.pods, 'default/p-1');
    await t.advance(50);
    expect(podKeys()).toEqual({ 'n-1': ['default/p-3'], 'n-2': [] });
  });

  it('gives a new failing-set number when a node fails or recovers, the same one while the failing nodes stay', async () => {
    t = new ProbeTester();
    for (const n of ['a-1', 'a-2', 'a-3']) {
      t.putNode(n, { labels: { [ZONE]: 'a' } });
      t.renewLease(n);
    }
    const { feed } = await setup();
    const numbers: number[] = [];
    const fleet = async (renew: string[], what: string, names: string[]) => {
      for (const n of renew) t.renewLease(n);
      await t.advance(SILENT_AFTER / 2 - 1);
      const f = feed.fleet(t.clock.now(), SILENT_AFTER);
      expect(
        rowsOf(f.nodes).map((n) => n.name),
        what,
      ).toEqual(names);
      numbers.push(f.failingSet);
    };
    await fleet(['a-1', 'a-2', 'a-3'], 'all renewing', []);
    await fleet(['a-1', 'a-2', 'a-3'], 'all renewing still', []);
    await fleet(['a-2', 'a-3'], 'a-1 stops', []);
    await fleet(['a-3'], 'a-1 silent, a-2 stops', ['a-1']);
    // as many failing nodes, not the same
    await fleet(['a-1', 'a-3'], 'a-2 silent, a-1 back', ['a-2']);
    await fleet(['a-1'], 'a-3 stops', ['a-2']);
    await fleet(['a-1'], 'a-3 silent', ['a-2', 'a-3']);
    // the last of them back: the same first nodes, fewer of them
    await fleet(['a-1', 'a-3'], 'a-3 back', ['a-2']);
    await fleet(['a-1', 'a-3'], 'the same', ['a-2']);
    const changed = numbers.slice(1).map((n, i) => n !== numbers[i]);
    expect(changed).toEqual([false, false, true, true, false, true, true, false]);
  });
});

describe("forecast feed: the forecast's store", () => {
  it('is its own: a judgement with one feed keeps nothing in another, and a Node gone takes its row along', async () => {
    t = new ProbeTester();
    for (const [n, ready] of [
      ['a-1', 'Unknown'],
      ['a-2', 'False'],
      ['b-1', 'True'],
    ] as const)
      t.putNode(n, { labels: { [ZONE]: n.slice(0, 1) }, ready });
    t.putPod('default', 'p-1', { node: 'a-1' });
    t.putPod('default', 'p-2', { node: 'a-2', tolerations: [{ operator: 'Exists', tolerationSeconds: 30 }] });
    const nodes = t.kube.watches.watch(watchSpecs.nodes());
    const leases = t.kube.watches.watch(watchSpecs.nodeLeases());
    const pods = t.kube.watches.watch(watchSpecs.pods());
    await t.clock.runUntil(() => [nodes, leases, pods].every((w) => w.freshness().synced), 10_000, 10);
    const [one, other] = [0, 1].map(() => forecastFeed(nodes, leases, pods, { taintedSince: sinceOf }));
    const judge = (feed: ForecastFeed, store?: ForecastStore) => {
      const now = t.clock.now();
      const fleet = feed.fleet(now, SILENT_AFTER);
      return forecast({ now, settings, nodes: fleet.nodes, healthy: fleet.healthy, silentAfterMs: SILENT_AFTER }, store);
    };
    expect(one!.store).not.toBe(other!.store);
    const first = judge(one!, one!.store);
    expect([one!.store.has('a-1'), one!.store.has('a-2'), one!.store.size]).toEqual([true, true, 2]);
    expect(other!.store.size).toBe(0);
    // kept or not, the same forecast
    expect(first).toEqual(judge(one!));
    expect(first.pods.map((p) => p.key)).toEqual(['default/p-1', 'default/p-2']);
    expect(judge(other!, other!.store)).toEqual(first);
    t.api.remove(paths.nodes, 'a-1');
    await t.advance(50);
    expect([one!.store.has('a-1'), other!.store.has('a-1'), one!.store.has('a-2')]).toEqual([false, false, true]);
    expect(judge(one!, one!.store)).toEqual(judge(other!));
  });
});
