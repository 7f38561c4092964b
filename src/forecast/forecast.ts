import { byCodeUnit } from '../core/order.js';
import { FirstPods, evictsAt, outcomeOf } from './pods.js';
import { type ColumnsInput, type Forecast, type ForecastInput, type ForecastNode, type ZoneState, columnsOf, defaultSilentAfter, podColumnsOf } from './model.js';
import { EXCLUDED, FAILING, Judged, KEEPS_TAINT, NOT_READY_NOW, NOT_READY_TAINTS, TAINTED, UNREACHABLE_TAINTS, judgeNode, noExecuteOn, nodeForecast } from './nodes.js';
import { SortedByLate, ascending, countAtMost, firstAfter, firstPartialCount } from './taint-queue.js';
import { ForecastScratch } from './scratch.js';
import { tolerationMs } from '../kube/tolerations.js';

export type {
  ColumnsInput,
  Forecast,
  ForecastInput,
  ForecastNode,
  ForecastPod,
  LifecycleSettings,
  NodeColumns,
  NodeForecast,
  PodColumns,
  PodGroup,
  ZoneForecast,
  ZoneState,
} from './model.js';
export { columnsOf, defaultSilentAfter, groupPods, isFailing, lastHeartbeatOf, podColumnsOf } from './model.js';
export { ForecastScratch } from './scratch.js';

/*
 * The eviction forecast: a pure model of the node lifecycle controller and the taint manager of
 * kube-controller-manager (pkg/controller/nodelifecycle). From heartbeats, Ready conditions, taints, pods'
 * tolerations, zones and the controller's settings it predicts, per node, when it goes NotReady and gets the
 * NoExecute taint, and per pod the earliest time it can be evicted. Wherever the real controller's timing is
 * uncertain (it works in monitor-period passes, rate limiters refill, informers lag) the model takes the
 * earliest possible moment: it may be early, never late.
 */

const NEVER = Infinity;

export function zoneStateOf(notReady: number, size: number, threshold: number): ZoneState {
  const ready = size - notReady;
  if (ready === 0 && notReady > 0) return 'FullDisruption';
  if (notReady > 2 && notReady / size >= threshold) return 'PartialDisruption';
  return 'Normal';
}

/** A zone's passed nodes (not excluded) counted, its size with the healthy ones, and when its nodes go down, sorted. */
interface Zone {
  name: string;
  size: number;
  passed: number;
  notReadyNow: number;
  late: Float64Array;
  early: Float64Array;
  /** The fewest NotReady nodes that make it partially disrupted. */
  partialFrom: number;
}

export function forecast(input: ForecastInput): Forecast {
  // By name: the order nodes are reported in, and the order of nodes queued for a taint at the same moment. Callers
  // pass them in that order; then it is only checked.
  const nodes = byName(input.nodes);
  const { podsOn, ...rest } = input;
  return forecastColumns({ ...rest, nodes: columnsOf(nodes), pods: podColumnsOf(nodes.length, (i) => podsOn(nodes[i]!)) });
}

/** The forecast of nodes in columns, in name order. */
export function forecastColumns(input: ColumnsInput): Forecast {
  const { now, settings: s } = input;
  const silentAfter = input.silentAfterMs ?? defaultSilentAfter(s);
  const taintDelay = input.taintsInTheSamePass === false ? s.nodeMonitorPeriodMs : 0;
  const c = input.nodes;
  const n = c.count;
  const scratch = input.scratch ?? new ForecastScratch();
  const j = new Judged(n, scratch);
  const zoneIds = new Map<string, number>();
  const zoneNames: string[] = [];
  for (let i = 0; i < n; i++) {
    judgeNode(j, i, c, now, s, silentAfter, taintDelay);
    const zone = c.zone[i]!;
    let z = zoneIds.get(zone);
    if (z === undefined) {
      zoneIds.set(zone, (z = zoneNames.length));
      zoneNames.push(zone);
    }
    j.zone[i] = z;
  }
  // The nodes of each zone in name order: byZone[zoneStart[z]] to byZone[zoneStart[z + 1] - 1].
  const zoneStart = new Int32Array(zoneNames.length + 1);
  for (let i = 0; i < n; i++) zoneStart[j.zone[i]! + 1]!++;
  for (let z = 0; z < zoneNames.length; z++) zoneStart[z + 1]! += zoneStart[z]!;
  const byZone = scratch.int32('byZone', n);
  const filled = zoneStart.slice(0, zoneNames.length);
  for (let i = 0; i < n; i++) byZone[filled[j.zone[i]!]!++] = i;

  // Zones: only nodes not excluded from disruption checks count, the healthy ones by number. How many of a zone's
  // nodes are NotReady at t, surely (late bound) and possibly (early bound): the moments each node goes down are
  // sorted once per zone, so a count is a binary search, not a pass over the zone's nodes.
  const zoneOf: (Zone | undefined)[] = [];
  // the zones' moments side by side, each zone's a view of its own part
  const lates = scratch.float64('late', n);
  const earlies = scratch.float64('early', n);
  let used = 0;
  for (const [name, healthy] of input.healthy ?? []) if (healthy > 0 && !zoneIds.has(name)) zoneIds.set(name, zoneNames.push(name) - 1);
  for (let z = 0; z < zoneNames.length; z++) {
    const name = zoneNames[z]!;
    let passed = 0;
    let notReadyNow = 0;
    for (let k = zoneStart[z] ?? 0; k < (zoneStart[z + 1] ?? 0); k++) {
      const flags = j.flags[byZone[k]!]!;
      if (flags & EXCLUDED) continue;
      passed++;
      if (flags & NOT_READY_NOW) notReadyNow++;
    }
    const size = passed + (input.healthy?.get(name) ?? 0);
    if (passed === 0 && size <= 0) continue;
    const late = lates.subarray(used, used + passed);
    const early = earlies.subarray(used, used + passed);
    used += passed;
    let m = 0;
    for (let k = zoneStart[z] ?? 0; k < (zoneStart[z + 1] ?? 0); k++) {
      const i = byZone[k]!;
      if (j.flags[i]! & EXCLUDED) continue;
      late[m] = j.downLate[i]!;
      early[m++] = j.downEarly[i]!;
    }
    zoneOf[z] = { name, size, passed, notReadyNow, late: late.sort(), early: early.sort(), partialFrom: firstPartialCount(size, s.unhealthyZoneThreshold) };
  }
  const zones = zoneOf.filter((z) => z !== undefined);
  // every zone is surely down from the moment its last node surely is (never while one has a healthy node)
  let everyZoneDownAt = zones.length > 0 ? -NEVER : NEVER;
  for (const z of zones) everyZoneDownAt = Math.max(everyZoneDownAt, z.size > z.passed ? NEVER : (z.late[z.passed - 1] ?? -NEVER));
  const masterSureAt = (t: number) => t >= everyZoneDownAt;
  const rateFor = (state: ZoneState, size: number) =>
    state === 'PartialDisruption' ? (size > s.largeClusterSizeThreshold ? s.secondaryNodeEvictionRate : 0) : s.nodeEvictionRate;
  /**
   * The highest tainting rate the zone can have at t (uncertain states are resolved towards evicting): between the
   * nodes surely and possibly NotReady, the zone may be in any state those counts give. Normal counts are the lowest
   * ones and Full the highest, so the ends of the range and whether it reaches a partial disruption tell them all.
   */
  const rateAt = (z: Zone | undefined, t: number): number => {
    if (!z) return s.nodeEvictionRate;
    if (masterSureAt(t)) return 0;
    const lo = countAtMost(z.late, t);
    const hi = countAtMost(z.early, t);
    let best = Math.max(rateFor(zoneStateOf(lo, z.size, s.unhealthyZoneThreshold), z.size), rateFor(zoneStateOf(hi, z.size, s.unhealthyZoneThreshold), z.size));
    if (Math.max(lo, z.partialFrom) <= Math.min(hi, z.size - 1)) best = Math.max(best, rateFor('PartialDisruption', z.size));
    return best;
  };
  // The moments a zone's rate can change, sorted; needed only when a zone stops tainting for a while.
  let changes: Float64Array | undefined;
  const changesOf = () => {
    if (!changes) {
      const ts = new Float64Array(2 * n);
      ts.set(j.downEarly);
      ts.set(j.downLate, n);
      changes = ts.sort().filter(Number.isFinite);
    }
    return changes;
  };

  // Master disruption: when it is sure (from the moment the last zone surely goes down), taints go and no eviction
  // happens after it.
  const masterAt = everyZoneDownAt === NEVER ? undefined : Math.max(now, everyZoneDownAt);

  // Entering master disruption mode, the controller removes the taints of the nodes as it listed them at the start
  // of that pass (RemoveTaintOffNode skips a node whose listed copy has no taint): a taint added during that very
  // pass stays, and the taint manager evicts on it. So a taint still on a node a while after every zone went down
  // stays. The while: Ready transition times are stored to the second, and the pass itself takes time.
  let keepsTaintsFrom: number | undefined;
  if (masterAt !== undefined && masterAt <= now && j.flags.some((flags) => (flags & TAINTED) !== 0)) {
    let masterSince = -NEVER;
    for (let i = 0; i < n; i++) if (!(j.flags[i]! & EXCLUDED)) masterSince = Math.max(masterSince, Number.isNaN(c.transition[i]!) ? -NEVER : c.transition[i]!);
    const keptAfter = masterSince + 1000 + s.nodeMonitorPeriodMs;
    if (now < keptAfter) keepsTaintsFrom = keptAfter;
    else for (let i = 0; i < n; i++) if (j.flags[i]! & TAINTED) j.flags[i]! |= KEEPS_TAINT;
  }

  // Taints, zone by zone, through a token bucket (burst 1) at the zone's rate. The controller queues nodes in the
  // order it sees them NotReady; only a node surely queued before another delays it (nodes seen in the same
  // window may go in any order, so each is given the earliest place it can have).
  const zonesWithNodes = input.controllerRunning === false ? 0 : zoneStart.length - 1;
  for (let z = 0; z < zonesWithNodes; z++) {
    const zone = zoneOf[z];
    const members = byZone.subarray(zoneStart[z], zoneStart[z + 1]);
    // The bucket refills from each taint seen; the fastest rate the zone may have had makes it earliest.
    const fastest = Math.max(s.nodeEvictionRate, s.secondaryNodeEvictionRate);
    // Taints ahead in the queue, by the latest moment each node was queued; a node is delayed by those surely queued
    // before it. Nodes are taken in the order they become eligible, so once a taint counts it counts for the rest:
    // a running maximum instead of a pass over every taint for every node (thousands of nodes down at once).
    const ahead = new SortedByLate(members.length, scratch);
    let queued = 0;
    const queue = scratch.int32('queue', members.length);
    for (const i of members) {
      if (j.flags[i]! & TAINTED) {
        if (fastest > 0) ahead.add(-NEVER, j.taintAt[i]! + 1000 / fastest);
      } else if (Number.isFinite(j.eligible[i]!)) queue[queued++] = i;
    }
    // by the moment each becomes eligible, then by name
    const eligible = j.eligible;
    const when = scratch.float64('when', queued);
    for (let k = 0; k < queued; k++) when[k] = eligible[queue[k]!]!;
    const order = ascending(when, scratch);
    for (let k = 0; k < queued; k++) order[k] = queue[order[k]!]!;
    // the moments the zone's rate can change at which it is above 0, worked out if the zone stops tainting (once every
    // zone is surely down nothing is tainted again)
    let taintable: Float64Array | undefined;
    for (const i of order) {
      const nextToken = ahead.latestNextBefore(eligible[i]!);
      const from = Math.max(eligible[i]!, nextToken);
      const rate = rateAt(zone, from);
      const at = rate > 0 ? from : masterSureAt(from) ? undefined : firstAfter((taintable ??= changesOf().filter((t) => rateAt(zone, t) > 0)), from);
      if (at === undefined || (masterAt !== undefined && at >= masterAt)) {
        j.held[i] = masterAt !== undefined ? 1 : 2;
        continue;
      }
      j.taintAt[i] = at;
      ahead.add(j.eligibleLate[i]!, at + 1000 / (at === from ? rate : rateAt(zone, at)));
    }
  }
  // Only the nodes reported, and those a pod kept is on, are made objects: at thousands of failing nodes, what a
  // judgement makes is what the garbage collector then has to go through.
  const reported = Array.from({ length: Math.min(n, input.nodesKept ?? n) }, (_, i) => nodeForecast(j, i, c));
  const nodeAt = (i: number) => reported[i] ?? nodeForecast(j, i, c);

  // Pods: the taint manager deletes each when its tolerations of the node's NoExecute taints run out. Only pods on
  // failing nodes can be evicted, and a node's pods come in groups sharing one tolerations array (a workload's pods
  // do: resources.ts interns them): thousands of pods on a node are a handful of verdicts, read as numbers.
  const cutoff = masterAt ?? NEVER;
  const frozen = input.controllerRunning === false;
  const p = input.pods;
  let atRisk = 0;
  let nodesAtRisk = 0;
  let earliest: Forecast['earliest'];
  const pods = new FirstPods(input.podsKept ?? Infinity, (g) => p.keys(g), input.evictedPodsOnly);
  // toleration times by tolerations, for nodes whose only NoExecute taint is one of the controller's (NaN: not yet)
  const tolerated = new Map([NOT_READY_TAINTS, UNREACHABLE_TAINTS].map((taints) => [taints, new Float64Array(p.tolerations.length).fill(NaN)]));
  for (let i = 0; i < n; i++) {
    const first = p.start[i]!;
    const end = p.start[i + 1]!;
    if (first === end || !(j.flags[i]! & FAILING)) continue;
    const taintAt = j.taintAt[i]!;
    const keepsTaint = (j.flags[i]! & KEEPS_TAINT) !== 0;
    const taints = noExecuteOn(c.taints[i]!, j.controllerTaint[i]);
    const known = tolerated.get(taints);
    let nodeAtRisk = false;
    for (let g = first; g < end; g++) {
      const id = p.tolerationsId[g]!;
      let tol = known ? known[id]! : NaN;
      if (Number.isNaN(tol)) {
        tol = tolerationMs(p.tolerations[id]!, taints);
        if (known) known[id] = tol;
      }
      const outcome = outcomeOf(taintAt, keepsTaint, tol, cutoff, frozen);
      const at = evictsAt(outcome, taintAt, tol);
      pods.offer(g, p.first[g]!, at, i, tol, outcome);
      if (at === NEVER) continue;
      atRisk += p.size[g]!;
      nodeAtRisk = true;
      // the earliest eviction, and of pods evicted at that moment the first by key
      if (!earliest || at < earliest.at || (at === earliest.at && p.first[g]! < earliest.pod)) earliest = { at, pod: p.first[g]!, node: c.name[i]! };
    }
    if (nodeAtRisk) nodesAtRisk++;
  }
  return {
    at: now,
    nodes: reported,
    nodeCount: n,
    pods: pods.sorted(nodeAt),
    zones: zones.map(({ name, size, notReadyNow }) => ({ zone: name, size, notReadyNow, stateNow: zoneStateOf(notReadyNow, size, s.unhealthyZoneThreshold) })).sort((a, b) => byCodeUnit(a.zone, b.zone)),
    masterDisruptionAt: masterAt,
    earliest,
    atRisk,
    nodesAtRisk,
    frozen,
    keepsTaintsFrom,
  };
}

/** The nodes by name: as given when they are in that order already (the callers' case), else sorted. */
function byName(nodes: ForecastNode[]): readonly ForecastNode[] {
  for (let i = 1; i < nodes.length; i++) if (!(nodes[i - 1]!.name < nodes[i]!.name)) return [...nodes].sort((a, b) => byCodeUnit(a.name, b.name));
  return nodes;
}
