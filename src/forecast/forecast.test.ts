import { describe, expect, it } from 'vitest';
import {
  type ForecastInput,
  type ForecastNode,
  type ForecastPod,
  ForecastStore,
  defaultSilentAfter,
  forecast as forecastGroups,
  groupPods,
  isFailing,
  zoneStateOf,
} from './forecast.js';
import type { SlimToleration } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import { labSettings } from '../testing/lifecycle-settings.js';
import { seeded } from '../testing/seeded.js';
import { UNSEEN_MS } from './taint-queue.js';

const lab = labSettings;

const NOW = Date.UTC(2026, 0, 1, 0, 28, 10);
/** 1.20's controller queues a node for the NoExecute taint one monitor period after marking it Unknown. */
const on120 = { taintsInTheSamePass: false };
const s = (n: number) => n * 1000;

function node(name: string, heartbeatAgo: number, o: Partial<ForecastNode> = {}): ForecastNode {
  return {
    name,
    zone: 'z1',
    leaseRenew: NOW - heartbeatAgo,
    ready: { status: 'True', heartbeat: NOW - 60_000, transition: NOW - 3_600_000 },
    taints: [],
    ...o,
  };
}

const defaultTolerations = (seconds: number): SlimToleration[] => [
  { key: NOT_READY, operator: 'Exists', effect: 'NoExecute', seconds },
  { key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', seconds },
];
const pod = (key: string, nodeName: string, tolerations = defaultTolerations(30)): ForecastPod => ({ key, node: nodeName, tolerations });

/** Freezes a value and everything it holds (a Map's entries stay writable: compare a copy for those). */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of value instanceof Map ? [...value.keys(), ...value.values()] : Object.values(value)) deepFreeze(v);
  return value;
}

/** The forecast of pods given one by one (grouped per node as the probe groups them). */
function forecast({ pods, ...input }: ForecastInput & { pods: ForecastPod[] }) {
  const groups = groupPods(pods);
  const nodes = input.nodes.map((n) => ({ ...n, pods: groups.filter((g) => g.node === n.name) }));
  // silent after two renewals, as these cases were written for (defaultSilentAfter has its own test)
  return forecastGroups({ silentAfterMs: 4_000, ...input, nodes });
}

describe('eviction forecast', () => {
  it('predicts nothing while every node heartbeats, but says when each would go NotReady if it stopped', () => {
    const f = forecast({ now: NOW, settings: lab, nodes: [node('node-1', 500), node('node-2', 1500)], pods: [pod('default/a', 'node-1')] });
    expect(f.earliest).toBeUndefined();
    expect(f.atRisk).toBe(0);
    expect(f.nodes.map((n) => [n.name, n.silent, n.notReadyAt! - NOW])).toEqual([
      ['node-1', false, 7_500],
      ['node-2', false, 6_500],
    ]);
  });

  it('a silent node: NotReady at last heartbeat + grace, taint one monitor period later, eviction after the toleration', () => {
    // A lab run of the real 1.20 controller: renewal 00:28:04 → NotReady/taint 00:28:13–14 → pods Terminating 00:28:34 (toleration 20 s).
    const f = forecast({
      ...on120,
      now: NOW,
      settings: lab,
      nodes: [node('node-1', s(6)), node('node-2', 500), node('node-3', 700)],
      pods: [
        pod('default/web', 'node-1', defaultTolerations(20)),
        pod('default/bare', 'node-1', []),
        pod('kube-system/ds', 'node-1', [{ operator: 'Exists' }]),
      ],
    });
    const n1 = f.nodes.find((n) => n.name === 'node-1')!;
    expect(n1).toMatchObject({ silent: true, notReady: false, lastHeartbeat: NOW - s(6) });
    expect(n1.notReadyAt).toBe(Date.UTC(2026, 0, 1, 0, 28, 12));
    expect(n1.taintAt).toBe(Date.UTC(2026, 0, 1, 0, 28, 13));
    const at = Object.fromEntries(f.pods.map((p) => [p.key, p.evictAt]));
    expect(at['default/bare']).toBe(Date.UTC(2026, 0, 1, 0, 28, 13));
    expect(at['default/web']).toBe(Date.UTC(2026, 0, 1, 0, 28, 33));
    expect(at['kube-system/ds']).toBeUndefined();
    expect(f.earliest).toEqual({
      at: Date.UTC(2026, 0, 1, 0, 28, 13),
      pod: 'default/bare',
      node: 'node-1',
      likely: Date.UTC(2026, 0, 1, 0, 28, 13),
    });
    expect(f.atRisk).toBe(2);
  });

  it('newer controllers (kubernetes#120816, seen on 1.34 and 1.37): the taint comes in the pass that marks the node Unknown, and so the eviction', () => {
    // the lab's 1.37 controller: NotReady at 09:19:29.2, NoExecute taint 66 ms later, pods evicted 20 s after that
    const f = forecast({
      now: NOW,
      settings: lab,
      nodes: [node('node-1', s(6)), node('node-2', 500)],
      pods: [pod('default/web', 'node-1', defaultTolerations(20))],
    });
    const n1 = f.nodes.find((n) => n.name === 'node-1')!;
    expect(n1.notReadyAt).toBe(Date.UTC(2026, 0, 1, 0, 28, 12));
    expect(n1.taintAt).toBe(Date.UTC(2026, 0, 1, 0, 28, 12));
    expect(f.earliest).toEqual({
      at: Date.UTC(2026, 0, 1, 0, 28, 32),
      pod: 'default/web',
      node: 'node-1',
      likely: Date.UTC(2026, 0, 1, 0, 28, 32),
    });
    // once marked Unknown (stored to the second), it is queued at that second, not a monitor period later: not
    // tainted yet, it can be any moment now, or a moment ago, its taint not seen yet
    const unknown = node('node-1', s(9), { ready: { status: 'Unknown', transition: NOW - 400 } });
    expect(forecast({ now: NOW, settings: lab, nodes: [unknown, node('node-2', 500)], pods: [] }).nodes[0]!.taintAt).toBe(NOW - UNSEEN_MS);
    expect(forecast({ ...on120, now: NOW, settings: lab, nodes: [unknown, node('node-2', 500)], pods: [] }).nodes[0]!.taintAt).toBe(
      NOW + 600,
    );
  });

  it('uses the time a taint was really added, and the node reported NotReady by its kubelet gets the not-ready taint at once', () => {
    const tainted = node('node-1', s(40), {
      ready: { status: 'Unknown', transition: NOW - s(30) },
      taints: [{ key: UNREACHABLE, effect: 'NoExecute', timeAdded: NOW - s(29) }],
    });
    const sick = node('node-2', 300, { ready: { status: 'False', heartbeat: NOW - 300, transition: NOW - s(2) } });
    const onlyUnreachable: SlimToleration[] = [{ key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', seconds: 300 }];
    const f = forecast({
      now: NOW,
      settings: lab,
      nodes: [tainted, sick, node('node-3', 100), node('node-4', 100)],
      pods: [pod('a/one', 'node-1'), pod('a/two', 'node-2', onlyUnreachable)],
    });
    expect(f.pods.find((p) => p.key === 'a/one')?.evictAt).toBe(NOW + s(1));
    // NotReady for 2 s and not seen tainted yet: any moment now, or a moment ago
    expect(f.nodes.find((n) => n.name === 'node-2')?.taintAt).toBe(NOW - UNSEEN_MS);
    expect(f.pods.find((p) => p.key === 'a/two')).toMatchObject({ evictAt: NOW - UNSEEN_MS, why: 'does not tolerate the taint' });
  });

  it("judges pods of one workload on each node's own taints, node after node", () => {
    // one tolerations array on three failing nodes in a row: the middle one has a NoExecute taint of its own
    const tolerations = defaultTolerations(60);
    const down = (name: string, taints: ForecastNode['taints'] = []) =>
      node(name, s(40), {
        ready: { status: 'Unknown', transition: NOW - s(30) },
        taints: [...taints, { key: UNREACHABLE, effect: 'NoExecute', timeAdded: NOW - s(29) }],
      });
    const f = forecast({
      now: NOW,
      settings: lab,
      nodes: [down('node-1'), down('node-2', [{ key: 'dedicated', effect: 'NoExecute' }]), down('node-3'), node('node-4', 100)],
      pods: ['node-1', 'node-2', 'node-3'].map((n) => pod(`a/${n}`, n, tolerations)),
    });
    // tainted 29 s ago: due since then on node-2, whose own taint is not tolerated
    expect(f.pods.map((p) => [p.key, p.evictAt])).toEqual([
      ['a/node-2', NOW - s(29)],
      ['a/node-1', NOW + s(31)],
      ['a/node-3', NOW + s(31)],
    ]);
  });

  it('taints a fully disrupted zone at the normal rate while another zone is up: one node every 10 s', () => {
    const f = forecast({
      ...on120,
      now: NOW,
      settings: lab,
      // a-1 went silent 3.5 s before a-2: surely queued first
      nodes: [
        node('a-1', s(8), { zone: 'a' }),
        node('a-2', s(4.5), { zone: 'a' }),
        node('b-1', 100, { zone: 'b' }),
        node('b-2', 100, { zone: 'b' }),
      ],
      pods: [pod('x/p1', 'a-1'), pod('x/p2', 'a-2')],
    });
    expect(f.masterDisruptionAt).toBeUndefined();
    expect(f.nodes.filter((n) => n.zone === 'a').map((n) => n.taintAt! - NOW)).toEqual([s(1), s(11)]);
    expect(f.pods.map((p) => p.evictAt! - NOW)).toEqual([s(31), s(41)]);
  });

  it('gives nodes that go silent together the earliest place each can have in the queue', () => {
    const f = forecast({
      ...on120,
      now: NOW,
      settings: lab,
      nodes: [
        node('a-1', s(5), { zone: 'a' }),
        node('a-2', s(5), { zone: 'a' }),
        node('a-3', s(1), { zone: 'a' }),
        node('b-1', 100, { zone: 'b' }),
      ],
      pods: [],
    });
    expect(f.nodes.filter((n) => n.silent).map((n) => n.taintAt! - NOW)).toEqual([s(4), s(4)]);
  });

  it('predicts no eviction when every zone loses every node (master disruption mode), but where a taint may come in its last pass', () => {
    const f = forecast({
      now: NOW,
      settings: lab,
      // b-1 goes down first, a-2 last: its zone's is the pass that enters master disruption mode
      nodes: [node('a-1', s(5), { zone: 'a' }), node('a-2', s(4.5), { zone: 'a' }), node('b-1', s(7), { zone: 'b' })],
      pods: [pod('x/p1', 'a-1'), pod('x/p2', 'b-1'), pod('x/p3', 'a-2')],
    });
    expect(f.masterDisruptionAt).toBe(NOW - s(4.5) + s(8) + s(3));
    // b-1 is tainted before that pass: its taint is removed in it, its pod stays
    expect(f.pods.find((p) => p.key === 'x/p2')).toEqual({ key: 'x/p2', node: 'b-1', why: 'all zones disrupted: evictions stopped' });
    // a-1 and a-2 may be tainted in the pass itself (the controller removes only the taints it listed at its start):
    // evicted at the earliest, likely spared
    expect(f.pods.filter((p) => p.evictAt !== undefined).map((p) => [p.key, p.evictAt! - NOW, p.evictLikely])).toEqual([
      ['x/p1', s(3) + s(30), undefined],
      ['x/p3', s(3.5) + s(30), undefined],
    ]);
    expect(f.earliest).toEqual({ at: NOW + s(33), pod: 'x/p1', node: 'a-1' });
  });

  it('predicts the eviction on a taint the controller kept as it entered master disruption mode', () => {
    // a-1 went down a pass before the others and was tainted in the pass where every zone went down: the
    // controller removes only the taints of the nodes as it had listed them, so a-1's taint stays
    const down = (since: number) => ({ ready: { status: 'Unknown' as const, transition: NOW - since } });
    const taint = { key: UNREACHABLE, effect: 'NoExecute' as const, timeAdded: NOW - s(4) };
    const nodes = (since: number) => [
      node('a-1', s(15), { zone: 'a', ...down(since + s(1)), taints: [taint], taintedSince: NOW - s(4) }),
      node('a-2', s(14), { zone: 'a', ...down(since) }),
      node('b-1', s(14), { zone: 'b', ...down(since) }),
    ];
    const pods = [pod('x/on-a-1', 'a-1'), pod('x/on-b-1', 'b-1')];
    const kept = forecast({ now: NOW, settings: lab, nodes: nodes(s(4)), pods });
    expect(kept.masterDisruptionAt).toBe(NOW);
    expect(kept.nodes.find((n) => n.name === 'a-1')?.keepsTaint).toBe(true);
    expect(kept.earliest).toEqual({ at: NOW - s(4) + s(30), pod: 'x/on-a-1', node: 'a-1', likely: NOW - s(4) + s(30) });
    expect(kept.pods.find((p) => p.key === 'x/on-b-1')).toEqual({
      key: 'x/on-b-1',
      node: 'b-1',
      why: 'all zones disrupted: evictions stopped',
    });

    // every zone went down a moment ago: the controller is still removing taints; nothing is predicted yet
    const removing = forecast({ now: NOW, settings: lab, nodes: nodes(500), pods });
    expect(removing.nodes.find((n) => n.name === 'a-1')?.keepsTaint).toBeUndefined();
    expect(removing.atRisk).toBe(0);
    // to be judged again once the taint has outlived the pass (transition times are rounded to the second)
    expect(removing.keepsTaintsFrom).toBe(NOW - 500 + s(1) + s(1));
    expect(kept.keepsTaintsFrom).toBeUndefined();
  });

  it('still predicts the evictions that come before the last zone goes down', () => {
    const f = forecast({
      ...on120,
      now: NOW,
      settings: lab,
      nodes: [node('n-1', s(7)), node('n-2', s(4.5))],
      pods: [pod('x/untolerating', 'n-1', []), pod('x/tolerating', 'n-1')],
    });
    expect(f.masterDisruptionAt).toBe(NOW + s(6.5));
    expect(f.pods.map((p) => [p.key, p.evictAt === undefined ? null : p.evictAt - NOW])).toEqual([
      ['x/untolerating', s(2)],
      ['x/tolerating', null],
    ]);
  });

  it('stops tainting a small zone that is partially disrupted, at the secondary rate in a large one', () => {
    const down = { ready: { status: 'Unknown' as const, transition: NOW - s(10) } };
    const small = [0, 1, 2, 3, 4].map((i) => (i < 3 ? node(`s-${i}`, s(20), down) : node(`s-${i}`, 100)));
    const f1 = forecast({ now: NOW, settings: lab, nodes: small, pods: [pod('x/p', 's-0')] });
    expect(f1.zones[0]).toMatchObject({ stateNow: 'PartialDisruption', notReadyNow: 3 });
    expect(f1.nodes.filter((n) => n.notReady).every((n) => n.taintAt === undefined && n.held?.includes('partially'))).toBe(true);
    expect(f1.atRisk).toBe(0);

    // 40 of 60 nodes went NotReady one second apart, none tainted yet: any of them can be next, now; on 1.20, which
    // keeps them first in first out, the likely taints come 100 s apart (the secondary rate) in that order
    const big = Array.from({ length: 60 }, (_, i) =>
      node(`b-${String(i).padStart(2, '0')}`, i < 40 ? s(60) : 100, {
        ready: i < 40 ? { status: 'Unknown', transition: NOW - s(50) + s(i) } : { status: 'True' },
      }),
    );
    const f2 = forecast({ ...on120, requeuesEveryPass: false, now: NOW, settings: lab, nodes: big, pods: [] });
    const queued = f2.nodes.filter((n) => n.taintAt !== undefined);
    expect(queued).toHaveLength(40);
    expect(new Set(queued.map((n) => n.taintAt))).toEqual(new Set([NOW - UNSEEN_MS]));
    // (the tokens after the first counted from the earliest it may have come, a taint not seen yet)
    expect(queued.slice(0, 3).map((n) => n.taintLikely! - NOW)).toEqual([0, 100_000 - UNSEEN_MS, 200_000 - UNSEEN_MS]);
    // on releases that re-queue every pass, each is as likely to get any of the 40 tokens: the middle of them
    const f3 = forecast({ now: NOW, settings: lab, nodes: big, pods: [] });
    expect(f3.nodes.filter((n) => n.taintAt !== undefined).every((n) => n.taintLikely === NOW - UNSEEN_MS + 19.5 * 100_000)).toBe(true);
  });

  it('leaves nodes labelled exclude-disruption out of zone states', () => {
    const nodes = [node('n-1', s(20), { ready: { status: 'Unknown', transition: NOW - s(10) } }), node('n-2', 100, { excluded: true })];
    const f = forecast({ now: NOW, settings: lab, nodes, pods: [pod('x/p', 'n-1')] });
    expect(f.zones).toEqual([{ zone: 'z1', size: 1, notReadyNow: 1, stateNow: 'FullDisruption' }]);
    expect(f.masterDisruptionAt).toBe(NOW);
    expect(f.atRisk).toBe(0);
  });

  it('predicts nothing while no controller-manager leads, and says why', () => {
    const f = forecast({
      now: NOW,
      settings: lab,
      nodes: [node('n-1', s(30)), node('n-2', 100)],
      pods: [pod('x/p', 'n-1', [])],
      controller: { running: false },
    });
    expect(f).toMatchObject({ frozen: 'no kube-controller-manager is leading', atRisk: 0 });
    expect(f.pods).toEqual([{ key: 'x/p', node: 'n-1', why: 'no kube-controller-manager is leading' }]);
  });

  it('with taint eviction off, still taints nodes but evicts no pod; a new leader counts from its start', () => {
    const nodes = [node('n-1', s(30)), node('n-2', 100), node('n-3', 100)];
    const pods = [pod('x/p', 'n-1', defaultTolerations(30))];
    const off = forecast({
      now: NOW,
      settings: lab,
      nodes,
      pods,
      controller: { evictionsOff: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)' },
    });
    expect(off).toMatchObject({ frozen: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)', atRisk: 0 });
    expect(off.nodes[0]!.taintAt).toBe(NOW);
    // what the run would see if it restored the controller now: a new leader, whose taint manager starts counting now
    const restored = forecast({ now: NOW, settings: lab, nodes, pods, controller: { running: true, since: NOW } });
    expect(restored.earliest?.at).toBe(NOW + s(8) + s(30));
    // the controller-manager restarting under it (its lease not held for a moment): the run's own reason comes first
    const restarting = forecast({
      now: NOW,
      settings: lab,
      nodes,
      pods,
      controller: {
        running: false,
        stoppedBecause: 'no kube-controller-manager holds kube-system/kube-controller-manager',
        evictionsOff: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)',
      },
    });
    expect(restarting.frozen).toBe(
      'taint eviction disabled by this run (disable-taint-eviction on cp-1); no kube-controller-manager holds kube-system/kube-controller-manager',
    );
  });

  it("gives a new leader's grace period to nodes that were only silent when it took over", () => {
    // the leader took over 2 s ago: n-1, silent for 30 s, goes NotReady no earlier than 8 s after that
    const f = forecast({
      now: NOW,
      settings: lab,
      nodes: [node('n-1', s(30)), node('n-2', 100), node('n-3', 100)],
      pods: [pod('x/p', 'n-1', [])],
      controller: { since: NOW - s(2) },
    });
    expect(f.nodes[0]).toMatchObject({ notReadyAt: NOW + s(6), taintAt: NOW + s(6) });
  });

  it('a node that never posted status gets the startup grace period from its creation', () => {
    const young = node('n-1', 0, { leaseRenew: undefined, ready: undefined, created: NOW - s(30) });
    const f = forecast({ now: NOW, settings: lab, nodes: [young, node('n-2', 100)], pods: [] });
    expect(f.nodes[0]).toMatchObject({ silent: true, notReady: true });
  });
});

describe('eviction forecast: nodes kept', () => {
  it('reports the first nodesKept nodes by name, counts them all, and judges the pods on the others', () => {
    const nodes = Array.from({ length: 8 }, (_, i) => node(`n-${8 - i}`, s(20)));
    // a healthy node in another zone: no master disruption
    const healthy = new Map([['z2', 1]]);
    const all = forecast({ now: NOW, settings: lab, nodes, healthy, pods: [pod('x/p', 'n-8')] });
    const kept = forecast({ now: NOW, settings: lab, nodes, healthy, pods: [pod('x/p', 'n-8')], nodesKept: 3 });
    expect(kept.nodeCount).toBe(8);
    expect(kept.nodes.map((n) => n.name)).toEqual(['n-1', 'n-2', 'n-3']);
    expect(kept).toStrictEqual({ ...all, nodes: all.nodes.slice(0, 3) });
    expect(kept.pods).toMatchObject([{ key: 'x/p', node: 'n-8' }]);
    expect(kept.earliest).toMatchObject({ pod: 'x/p', node: 'n-8' });
  });
});

describe('silent after', () => {
  it("is the lease's duration, at least two renewals, and a renewal before the grace period runs out", () => {
    // production: 40 s leases renewed every 10 s; no node counts as failing for 40 s without a renewal
    expect(defaultSilentAfter({ ...lab, leaseDurationMs: 40_000, nodeMonitorGracePeriodMs: 50_000 })).toBe(40_000);
    // before 1.32 the grace period was 40 s: silent a renewal before it runs out
    expect(defaultSilentAfter({ ...lab, leaseDurationMs: 40_000, nodeMonitorGracePeriodMs: 40_000 })).toBe(30_000);
    // the lab: 8 s leases renewed every 2 s, grace 8 s
    expect(defaultSilentAfter(lab)).toBe(6_000);
    // a grace period as short as the renewals (incident 002's mistake): still two renewals and a margin
    expect(defaultSilentAfter({ ...lab, leaseDurationMs: 40_000, nodeMonitorGracePeriodMs: 10_000 })).toBe(12_000);
  });
});

describe('zone states', () => {
  it('follows ComputeZoneState: full with no Ready node, partial above the threshold with more than 2 NotReady', () => {
    expect(zoneStateOf(2, 2, 0.55)).toBe('FullDisruption');
    expect(zoneStateOf(2, 3, 0.55)).toBe('Normal');
    expect(zoneStateOf(3, 5, 0.55)).toBe('PartialDisruption');
    expect(zoneStateOf(3, 6, 0.55)).toBe('Normal');
  });
});

describe('eviction forecast: many pods', () => {
  it('keeps the first podsKept pods by eviction time and counts them all; pods sharing tolerations share a verdict', () => {
    const shared = defaultTolerations(30);
    const nodes = [node('n-1', s(6)), node('n-2', s(6), { zone: 'z2' }), node('n-3', s(6), { zone: 'z3' }), node('n-4', 500)];
    const pods = [
      ...['n-1', 'n-2', 'n-3', 'n-4'].flatMap((n) => Array.from({ length: 5 }, (_, i) => pod(`ns/${n}-${i}`, n, shared))),
      pod('ns/forever', 'n-2', [{ operator: 'Exists' }]),
      pod('ns/bare', 'n-3', []),
    ];
    const all = forecast({ now: NOW, settings: lab, nodes, pods });
    const some = forecast({ now: NOW, settings: lab, nodes, pods, podsKept: 4 });
    expect(some.pods).toEqual(all.pods.slice(0, 4));
    expect(some.pods[0]).toMatchObject({ key: 'ns/bare', why: 'does not tolerate the taint' });
    expect([some.atRisk, some.nodesAtRisk, some.earliest]).toEqual([all.atRisk, all.nodesAtRisk, all.earliest]);
    // every pod on the three silent nodes but the one that tolerates forever; none on the heartbeating n-4
    expect([all.atRisk, all.nodesAtRisk]).toEqual([16, 3]);
    expect(all.pods.find((p) => p.key === 'ns/forever')).toMatchObject({ why: 'tolerates the taint forever' });
    expect(all.pods.find((p) => p.key === 'ns/forever')!.evictAt).toBeUndefined();
    const n1 = all.pods.filter((p) => p.node === 'n-1');
    expect(new Set(n1.map((p) => p.evictAt)).size).toBe(1);
    expect(n1.map((p) => p.key)).toEqual(['ns/n-1-0', 'ns/n-1-1', 'ns/n-1-2', 'ns/n-1-3', 'ns/n-1-4']);
    // judged one by one (no two pods share a tolerations array, so each is a group of its own) it is the same forecast
    const alone = [...pods].reverse().map((p) => ({ ...p, tolerations: [...p.tolerations] }));
    expect(groupPods(alone)).toHaveLength(pods.length);
    for (const podsKept of [undefined, 0, 1, 4, 7])
      expect(forecast({ now: NOW, settings: lab, nodes, pods: alone, podsKept })).toEqual(
        forecast({ now: NOW, settings: lab, nodes, pods, podsKept }),
      );
    // only the pods to be evicted listed: the first of those, and the same counts
    const evicted = all.pods.filter((p) => p.evictAt !== undefined);
    expect(evicted).toHaveLength(16);
    for (const podsKept of [undefined, 0, 4, 16, 20]) {
      const only = forecast({ now: NOW, settings: lab, nodes, pods, podsKept, evictedPodsOnly: true });
      expect(only.pods, `podsKept ${podsKept}`).toEqual(evicted.slice(0, podsKept));
      expect([only.atRisk, only.nodesAtRisk, only.earliest]).toEqual([all.atRisk, all.nodesAtRisk, all.earliest]);
    }
  });
});

describe('eviction forecast: healthy nodes as counts', () => {
  /** A fleet of 1–3 zones whose nodes are in every state the forecast knows, and pods on them. */
  function fleet(seed: number) {
    const r = seeded(seed);
    const zones = ['z1', 'z2', 'z3'].slice(0, 1 + r.int(3));
    const nodes: ForecastNode[] = [];
    for (const zone of zones)
      for (let i = 0, n = 1 + r.int(r.next() < 0.3 ? 60 : 8); i < n; i++) {
        const name = `${zone}-n${i}`;
        const o: Partial<ForecastNode> = { zone, excluded: r.next() < 0.08 };
        const kind = r.pick(['healthy', 'healthy', 'healthy', 'silent', 'unknown', 'false', 'tainted', 'young', 'back']);
        if (kind === 'silent') o.leaseRenew = NOW - s(5 + r.int(60));
        if (kind === 'unknown')
          Object.assign(o, { leaseRenew: NOW - s(9 + r.int(40)), ready: { status: 'Unknown', transition: NOW - s(r.int(30)) } });
        if (kind === 'false') o.ready = { status: 'False', heartbeat: NOW - 500, transition: NOW - s(r.int(20)) };
        if (kind === 'tainted')
          Object.assign(o, {
            leaseRenew: NOW - s(10 + r.int(60)),
            ready: { status: 'Unknown', transition: NOW - s(2 + r.int(40)) },
            taints: [{ key: r.pick([UNREACHABLE, NOT_READY]), effect: 'NoExecute', timeAdded: NOW - s(1 + r.int(40)) }],
            taintedSince: r.next() < 0.5 ? NOW - s(1 + r.int(40)) : undefined,
          });
        if (kind === 'young') Object.assign(o, { leaseRenew: undefined, ready: undefined, created: NOW - s(r.int(120)) });
        // heartbeats back, Ready not yet
        if (kind === 'back') Object.assign(o, { leaseRenew: NOW - 300, ready: { status: 'Unknown', transition: NOW - s(r.int(20)) } });
        if (kind === 'healthy' && r.next() < 0.2) o.taints = [{ key: 'dedicated', effect: 'NoExecute' }];
        nodes.push(node(name, r.int(3900), o));
      }
    const pods: ForecastPod[] = [];
    for (const n of nodes)
      for (let i = 0, k = r.int(4); i < k; i++)
        pods.push(
          pod(
            `ns/${n.name}-${i}`,
            n.name,
            r.pick([
              defaultTolerations(30),
              defaultTolerations(300),
              [],
              [{ operator: 'Exists' }],
              [{ key: 'dedicated', operator: 'Exists', effect: 'NoExecute', seconds: 20 }, ...defaultTolerations(60)],
            ]),
          ),
        );
    const options = {
      controller: r.pick([{}, { running: true }, { running: false }]),
      taintsInTheSamePass: r.pick([undefined, true, false]),
      podsKept: r.pick([undefined, 0, 3, 20]),
    };
    return { nodes, pods, options };
  }

  it('gives the same forecast when the nodes it can predict nothing for are passed as counts per zone', () => {
    const silentAfterMs = 4_000;
    let compared = 0;
    let withHealthy = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const { nodes, pods, options } = fleet(seed);
      const all = forecast({ now: NOW, settings: lab, nodes, pods, silentAfterMs, ...options });
      const failing = nodes.filter((n) => isFailing(n, n.leaseRenew, NOW, silentAfterMs));
      const healthy = new Map<string, number>();
      for (const n of nodes) if (!failing.includes(n) && !n.excluded) healthy.set(n.zone, (healthy.get(n.zone) ?? 0) + 1);
      const counted = forecast({ now: NOW, settings: lab, nodes: failing, healthy, pods, silentAfterMs, ...options });
      const names = new Set(failing.map((n) => n.name));
      expect(counted, `seed ${seed}`).toEqual({ ...all, nodes: all.nodes.filter((n) => names.has(n.name)), nodeCount: failing.length });
      // what it leaves out is what the full forecast says of a healthy node
      for (const n of all.nodes.filter((x) => !names.has(x.name)))
        expect(n, `seed ${seed}`).toMatchObject({ silent: false, notReady: false, tainted: false });
      compared++;
      if (healthy.size && failing.length) withHealthy++;
    }
    expect(compared).toBe(400);
    // the fleets mix healthy and failing nodes (and sometimes reach master disruption, or none is failing)
    expect(withHealthy).toBeGreaterThan(300);
  });

  it('only reads its input: frozen, judged twice with a store kept over fleets, the same as judged anew, unchanged', () => {
    const store = new ForecastStore();
    let atRisk = 0;
    for (let seed = 1; seed <= 80; seed++) {
      const { nodes, pods, options } = fleet(seed);
      const groups = groupPods(pods);
      const healthy = new Map([['z9', 3]]);
      const input: ForecastInput = {
        now: NOW,
        settings: lab,
        nodes: nodes.map((n) => ({ ...n, pods: groups.filter((g) => g.node === n.name) })),
        healthy,
        silentAfterMs: 4_000,
        ...options,
      };
      const before = structuredClone(input);
      deepFreeze(input);
      const anew = forecastGroups(structuredClone(input));
      // once to lay the nodes out and work their pods out, once more on what the store kept of that
      for (const k of [1, 2]) expect(forecastGroups(input, store), `seed ${seed}, judgement ${k}`).toEqual(anew);
      expect(input, `seed ${seed}`).toEqual(before);
      atRisk += anew.atRisk;
    }
    expect(store.size).toBeGreaterThan(60);
    expect(atRisk).toBeGreaterThan(200);
  });

  it('gives the same forecast whatever the order the nodes are passed in', () => {
    let ties = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const { nodes, pods, options } = fleet(seed);
      const r = seeded(seed + 1000);
      const shuffled = nodes
        .map((n) => ({ n, k: r.next() }))
        .sort((a, b) => a.k - b.k)
        .map(({ n }) => n);
      const sorted = [...nodes].sort((a, b) => (a.name < b.name ? -1 : 1));
      const f = forecast({ now: NOW, settings: lab, nodes: sorted, pods, ...options });
      expect(forecast({ now: NOW, settings: lab, nodes: shuffled, pods, ...options }), `seed ${seed}`).toStrictEqual(f);
      expect(f.nodes.map((n) => n.name)).toEqual(sorted.map((n) => n.name));
      // nodes queued for a taint at the same moment (taken in name order) are among them
      const queuedAt = f.nodes.filter((n) => !n.tainted && n.taintAt !== undefined).map((n) => n.taintAt);
      if (new Set(queuedAt).size < queuedAt.length) ties++;
    }
    expect(ties).toBeGreaterThan(20);
  });
});
