import { describe, expect, it } from 'vitest';
import {
  type ForecastNode,
  type ForecastPod,
  ForecastStore,
  type PodGroup,
  defaultSilentAfter,
  forecast,
  groupPods,
  isFailing,
} from './forecast.js';
import type { LifecycleSettings } from '../kube/versions.js';
import type { SlimToleration } from '../kube/resources.js';
import { UNREACHABLE } from '../kube/tolerations.js';
import { type SimNode, type SimPod, simulateController } from '../testing/controller-sim.js';
import { simSettings } from '../testing/lifecycle-settings.js';
import { seeded } from '../testing/seeded.js';

/*
 * The forecast against a stand-in for the node lifecycle controller (src/testing/controller-sim.ts) over hundreds of
 * seeded fleets: kubelets stop in some zones, the controller marks them Unknown, queues them, taints them through each
 * zone's token bucket in the order its parallel workers re-queued them (1.34, 1.37) or first in first out with the
 * leftover entries that re-taint tainted nodes and take tokens (1.20), and the taint manager deletes pods when their
 * tolerations run out. At every look after the stopped nodes fell silent,
 * each node's predicted taint and each pod's predicted eviction must come no later than the controller's.
 */

const START = Date.UTC(2026, 10, 1, 12, 0, 0);

const lab = simSettings;
const production: LifecycleSettings = {
  ...lab,
  nodeMonitorGracePeriodMs: 50_000,
  nodeMonitorPeriodMs: 5_000,
  leaseDurationMs: 40_000,
  unhealthyZoneThreshold: 0.55,
  secondaryNodeEvictionRate: 0.01,
};

const tolerating = (ms: number): SlimToleration[] =>
  ms === 0 ? [] : [{ key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', ...(Number.isFinite(ms) ? { seconds: ms / 1000 } : {}) }];

function fleet(seed: number) {
  const r = seeded(seed);
  const settings: LifecycleSettings = {
    ...r.pick([lab, production]),
    largeClusterSizeThreshold: r.pick([10, 50]),
    ...(r.next() < 0.5 ? { unhealthyZoneThreshold: r.pick([0.25, 0.55]) } : {}),
  };
  const requeue = r.next() < 0.7;
  const taintsInTheSamePass = requeue || r.next() < 0.5;
  const stopFrom = START + 30_000;
  const window = r.pick([0, 5_000, 30_000]);
  const nodes: SimNode[] = [];
  const zones = ['zone-a', 'zone-b', 'zone-c'].slice(0, 1 + r.int(3));
  for (const zone of zones) {
    const size = 3 + r.int(r.next() < 0.4 ? 70 : 20);
    const scenario = r.pick(['healthy', 'few', 'partial', 'partial', 'all']);
    const stopped =
      scenario === 'healthy' ? 0 : scenario === 'few' ? 1 + r.int(3) : scenario === 'all' ? size : Math.ceil(size * (0.2 + 0.6 * r.next()));
    for (let i = 0; i < size; i++)
      nodes.push({
        name: `${zone}-${String(i).padStart(3, '0')}`,
        zone,
        ...(r.next() < 0.05 ? { excluded: true } : {}),
        ...(i < stopped ? { stopsAt: stopFrom + r.next() * window } : {}),
      });
  }
  const pods: SimPod[] = [];
  for (const n of nodes)
    for (let i = 0, k = r.int(3); i < k; i++)
      pods.push({ key: `ns/${n.name}-${i}`, node: n.name, tolerationMs: r.pick([0, 15_000, 30_000, 300_000, Infinity]) });
  const leaderFrom = r.next() < 0.2 ? stopFrom + window + r.next() * 2 * settings.nodeMonitorGracePeriodMs : undefined;
  return { settings, requeue, taintsInTheSamePass, nodes, pods, stopFrom, window, leaderFrom };
}

/** What simulateController is given of fleet `f` and its seed, from START (its `end` and looks are the caller's). */
function controllerOver(f: ReturnType<typeof fleet>, seed: number) {
  const { settings, requeue, taintsInTheSamePass, nodes, pods, leaderFrom } = f;
  return { settings, requeue, taintsInTheSamePass, nodes, pods, leaderFrom, seed, start: START };
}

function groupBy<T, K>(xs: readonly T[], key: (x: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const x of xs) out.set(key(x), [...(out.get(key(x)) ?? []), x]);
  return out;
}

/** `key` behind a prefix worked out from it (FNV-1a): keys sorted in no order of their nodes or pods. */
function scrambled(key: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return `${((h >>> 0) % 997).toString().padStart(3, '0')}/${key}`;
}

/**
 * Runs the controller over fleet `f` from 5 s before its nodes stop until `after` ms past the last one's grace
 * period, and at a look every 3 monitor periods + 0.7 s hands `look` the moment, the nodes as the probe's feed keeps
 * them (one object per node, its fields rewritten as its Node and Lease change) and the same nodes made anew; each
 * node's pods from `byNode`.
 */
function lookEvery(
  f: ReturnType<typeof fleet>,
  seed: number,
  after: number,
  byNode: ReadonlyMap<string, PodGroup[]>,
  look: (at: number, judged: ForecastNode[], anew: () => ForecastNode[]) => void,
): void {
  const from = f.stopFrom - 5_000;
  const end = f.stopFrom + f.window + f.settings.nodeMonitorGracePeriodMs + after;
  const step = f.settings.nodeMonitorPeriodMs * 3 + 700;
  const kept = new Map<string, ForecastNode>();
  simulateController({
    ...controllerOver(f, seed),
    end,
    lookAt: Array.from({ length: Math.floor((end - from) / step) }, (_, k) => from + k * step),
    look(at, nodes) {
      const judged = nodes.map((n) => {
        const k = kept.get(n.name) ?? { ...n };
        kept.set(n.name, Object.assign(k, n, { pods: byNode.get(n.name) ?? [] }));
        return k;
      });
      look(at, judged, () => nodes.map((n) => ({ ...n, pods: byNode.get(n.name) ?? [] })));
    },
  });
}

interface Late {
  seed: number;
  at: number;
  what: string;
  predicted: number | undefined;
  real: number;
}

describe('the forecast against the controller, fleet after fleet', () => {
  it('is never late: no taint or eviction predicted after the controller made it, none missed', () => {
    const late: Late[] = [];
    let judged = 0;
    let outOfOrder = 0;
    let evictions = 0;
    let retaints = 0;
    let spread = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const f = fleet(seed);
      const silentAfter = defaultSilentAfter(f.settings);
      const from = Math.max(f.stopFrom + f.window + silentAfter + 1000, f.leaderFrom ?? 0);
      const end = f.stopFrom + f.window + f.settings.nodeMonitorGracePeriodMs + 400_000;
      const step = f.settings.nodeMonitorPeriodMs * 2 + 500;
      const lookAt = Array.from({ length: Math.floor((end - from) / step) }, (_, k) => from + k * step);
      const groups = groupPods(f.pods.map((p): ForecastPod => ({ key: p.key, node: p.node, tolerations: tolerating(p.tolerationMs) })));
      const byNode = groupBy(groups, (g) => g.node);
      const predictions: { at: number; taints: Map<string, number | undefined>; evictions: Map<string, number | undefined> }[] = [];
      const outcome = simulateController({
        ...controllerOver(f, seed),
        end,
        lookAt,
        look(at, nodes) {
          const forecastNow = forecast({
            now: at,
            settings: f.settings,
            nodes: nodes.map((n) => ({ ...n, pods: byNode.get(n.name) ?? [] })),
            taintsInTheSamePass: f.taintsInTheSamePass,
            requeuesEveryPass: f.requeue,
            ...(f.leaderFrom !== undefined ? { controller: { since: f.leaderFrom } } : {}),
          });
          const failing = new Set(forecastNow.nodes.filter((n) => n.silent || n.notReady || n.tainted).map((n) => n.name));
          predictions.push({
            at,
            taints: new Map(forecastNow.nodes.filter((n) => failing.has(n.name) && !n.tainted).map((n) => [n.name, n.taintAt])),
            evictions: new Map(forecastNow.pods.filter((p) => failing.has(p.node)).map((p) => [p.key, p.evictAt])),
          });
          for (const n of forecastNow.nodes)
            if (n.taintAt !== undefined && n.taintLikely !== undefined) spread = Math.max(spread, n.taintLikely - n.taintAt);
          judged++;
        },
      });
      for (const p of predictions) {
        for (const [name, predicted] of p.taints) {
          const real = outcome.tainted.get(name);
          if (real !== undefined && real > p.at && !(predicted !== undefined && predicted <= real))
            late.push({ seed, at: p.at, what: `taint of ${name}`, predicted, real });
        }
        for (const [key, predicted] of p.evictions) {
          const real = outcome.evicted.get(key);
          if (real !== undefined && real > p.at && !(predicted !== undefined && predicted <= real))
            late.push({ seed, at: p.at, what: `eviction of ${key}`, predicted, real });
        }
      }
      evictions += outcome.evicted.size;
      retaints += outcome.taints.length - outcome.tainted.size;
      // taints out of the order the nodes stopped in, within a zone
      for (const zone of new Set(f.nodes.map((n) => n.zone))) {
        const stopped = f.nodes.filter((n) => n.zone === zone && outcome.tainted.has(n.name)).sort((a, b) => a.stopsAt! - b.stopsAt!);
        for (let i = 1; i < stopped.length; i++)
          if (outcome.tainted.get(stopped[i]!.name)! < outcome.tainted.get(stopped[i - 1]!.name)!) outOfOrder++;
      }
    }
    const firstPerSeed = [...groupBy(late, (l) => l.seed).values()].map((ls) => ls[0]!);
    // the first late reading of each seed, five at most in the message; then the count, whatever was shown
    const worst = firstPerSeed.slice(0, 5);
    expect(
      worst.map(
        (l) =>
          `seed ${l.seed} at +${(l.at - START) / 1000}s: ${l.what} predicted ${l.predicted === undefined ? 'never' : `+${(l.predicted - START) / 1000}s`}, done +${(l.real - START) / 1000}s`,
      ),
    ).toEqual([]);
    expect(late.length, `late or missed readings in ${firstPerSeed.length} seeds`).toBe(0);
    // the fleets are ones where order matters: many taints came out of the order the nodes stopped in
    expect(outOfOrder).toBeGreaterThan(200);
    expect(evictions).toBeGreaterThan(1000);
    // and 1.20's leftover entries re-tainted nodes, each with a token another node waited for
    expect(retaints).toBeGreaterThan(500);
    expect(judged).toBeGreaterThan(10_000);
    // and the likely moment is reported apart from the bound where the order is not known
    expect(spread).toBeGreaterThan(0);
    // 300 fleets: some 20 s alone, a minute and more on a machine shared with other work
  }, 240_000);

  it('judges nodes kept from one judgement to the next (their rows rewritten) as it judges them anew', () => {
    let compared = 0;
    let failing = 0;
    for (let seed = 1; seed <= 30; seed++) {
      const f = fleet(seed);
      const silentAfter = defaultSilentAfter(f.settings);
      const byNode = groupBy(
        groupPods(f.pods.map((p): ForecastPod => ({ key: p.key, node: p.node, tolerations: tolerating(p.tolerationMs) }))),
        (g) => g.node,
      );
      // the rows kept from one judgement to the next, as the feed keeps them
      const store = new ForecastStore();
      lookEvery(f, seed, 120_000, byNode, (at, judged, anew) => {
        // as the probe judges: the reading, and while frozen what follows a new leader now, on the same nodes
        for (const input of [
          { controller: f.leaderFrom !== undefined ? { since: f.leaderFrom } : {}, podsKept: 20, evictedPodsOnly: true, nodesKept: 100 },
          { controller: { running: true, since: at }, podsKept: 0, nodesKept: 0 },
          { controller: { running: false } },
        ]) {
          const common = {
            now: at,
            settings: f.settings,
            silentAfterMs: silentAfter,
            taintsInTheSamePass: f.taintsInTheSamePass,
            requeuesEveryPass: f.requeue,
          };
          expect(forecast({ ...common, ...input, nodes: judged }, store), `seed ${seed} at +${(at - START) / 1000}s`).toEqual(
            forecast({ ...common, ...input, nodes: anew() }),
          );
          compared++;
        }
        if (judged.some((n) => isFailing(n, n.leaseRenew, at, silentAfter))) failing++;
      });
    }
    expect(compared).toBeGreaterThan(1_500);
    expect(failing).toBeGreaterThan(400);
  });

  it('reports the first pods, the earliest eviction and the pods at risk as a judgement of every pod does', () => {
    let compared = 0;
    let atRisk = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const f = fleet(seed);
      // keys in no order of nodes or pods, so that pods evicted at one moment are told apart by key; each pod twice, in
      // two groups of one toleration time
      const byNode = groupBy(
        groupPods(
          f.pods.flatMap((p): ForecastPod[] =>
            [p.key, `${p.key}-twin`].map((key) => ({ key: scrambled(key), node: p.node, tolerations: tolerating(p.tolerationMs) })),
          ),
        ),
        (g) => g.node,
      );
      lookEvery(f, seed, 200_000, byNode, (at, judged, anew) => {
        const common = {
          now: at,
          settings: f.settings,
          taintsInTheSamePass: f.taintsInTheSamePass,
          requeuesEveryPass: f.requeue,
          controller: f.leaderFrom !== undefined ? { since: f.leaderFrom } : {},
        };
        // as the probe judges, on nodes kept from one judgement to the next; and every pod, on nodes anew
        const first = forecast({ ...common, nodes: judged, podsKept: 5, evictedPodsOnly: true });
        const all = forecast({ ...common, nodes: anew() });
        const evicted = all.pods.filter((p) => p.evictAt !== undefined);
        const say = `seed ${seed} at +${(at - START) / 1000}s`;
        expect(first.pods, say).toEqual(evicted.slice(0, 5));
        expect(first.earliest, say).toEqual(all.earliest);
        // as the probe asks what a new leader would do: no pods listed, the earliest eviction alone
        expect(forecast({ ...common, nodes: judged, podsKept: 0 }).earliest, say).toEqual(all.earliest);
        expect([first.atRisk, first.nodesAtRisk], say).toEqual([evicted.length, new Set(evicted.map((p) => p.node)).size]);
        atRisk += first.atRisk;
        compared++;
      });
    }
    expect(compared).toBeGreaterThan(1_000);
    expect(atRisk).toBeGreaterThan(10_000);
  });
});
