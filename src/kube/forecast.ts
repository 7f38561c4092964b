import { byCodeUnit } from '../core/order.js';
import type { ConditionStatus, SlimTaint, SlimToleration } from './resources.js';
import { FirstPods, type PodForecast, evictsAt, outcomeOf } from './forecast-pods.js';
import { NOT_READY, UNREACHABLE, tolerationMs } from './tolerations.js';

/**
 * The eviction forecast: a pure model of the node lifecycle controller and the taint manager of
 * kube-controller-manager (pkg/controller/nodelifecycle). From heartbeats, Ready conditions, taints, pods'
 * tolerations, zones and the controller's settings it predicts, per node, when it goes NotReady and gets the
 * NoExecute taint, and per pod the earliest time it can be evicted. Wherever the real controller's timing is
 * uncertain (it works in monitor-period passes, rate limiters refill, informers lag) the model takes the
 * earliest possible moment: it may be early, never late.
 */

export interface LifecycleSettings {
  nodeMonitorGracePeriodMs: number;
  nodeMonitorPeriodMs: number;
  nodeStartupGracePeriodMs: number;
  /** Nodes per second tainted in a healthy (or fully disrupted) zone. */
  nodeEvictionRate: number;
  /** Nodes per second in a partially disrupted zone larger than largeClusterSizeThreshold; 0 otherwise. */
  secondaryNodeEvictionRate: number;
  unhealthyZoneThreshold: number;
  largeClusterSizeThreshold: number;
  /** The kubelet's lease duration; it renews every quarter of it. */
  leaseDurationMs: number;
}

export interface ForecastNode {
  name: string;
  zone: string;
  /** Labelled node.kubernetes.io/exclude-disruption: not counted in zone states. */
  excluded?: boolean;
  created?: number;
  ready?: { status: 'True' | 'False' | 'Unknown'; heartbeat?: number; transition?: number };
  leaseRenew?: number;
  taints: SlimTaint[];
  /**
   * Since when its NoExecute taint has been on without a break. The controller re-adds the taint with a new
   * timeAdded while the node stays down, but the taint manager keeps the eviction time it scheduled first.
   */
  taintedSince?: number;
}

export interface ForecastPod {
  key: string;
  node: string;
  tolerations: SlimToleration[];
}

/**
 * Pods on one node that share one tolerations array (the pods of a workload do: resources.ts interns them), their
 * keys sorted by code unit. The forecast judges a group once, whatever its size.
 */
export interface PodGroup {
  node: string;
  tolerations: SlimToleration[];
  keys: readonly string[];
}

/** Pods grouped by node and tolerations array, in the order each group first appears. */
export function groupPods(pods: Iterable<ForecastPod>): PodGroup[] {
  const groups = new Map<string, Map<SlimToleration[], string[]>>();
  for (const p of pods) {
    let byTolerations = groups.get(p.node);
    if (!byTolerations) groups.set(p.node, (byTolerations = new Map()));
    const keys = byTolerations.get(p.tolerations);
    if (keys) keys.push(p.key);
    else byTolerations.set(p.tolerations, [p.key]);
  }
  return [...groups].flatMap(([node, byTolerations]) => [...byTolerations].map(([tolerations, keys]) => ({ node, tolerations, keys: keys.sort(byCodeUnit) })));
}

export interface ForecastInput {
  now: number;
  settings: LifecycleSettings;
  nodes: ForecastNode[];
  /**
   * Nodes left out of `nodes` because nothing can be predicted for them now, counted by zone: Ready, heartbeating
   * within silentAfterMs, without the controller's NoExecute taint, and not labelled exclude-disruption. They count in
   * their zone's size and nowhere else; the caller judges again when the first of them may go silent. At thousands
   * of nodes this is most of the fleet, and passing counts instead of objects keeps a forecast to the failing nodes.
   */
  healthy?: ReadonlyMap<string, number>;
  /**
   * A node's pods that can be evicted, grouped (see groupPods); asked only for the nodes in `nodes` that are failing
   * (silent, NotReady or tainted), whose names are unique, with the node as passed in `nodes`.
   */
  podsOn(node: ForecastNode): readonly PodGroup[];
  /** A node whose last heartbeat is older than this is taken as silent (it will not renew again). */
  silentAfterMs?: number;
  /**
   * false when no kube-controller-manager holds its leader lease: nothing taints or evicts until one comes back
   * (and a new one starts its grace periods from then). Unknown or running: undefined/true.
   */
  controllerRunning?: boolean;
  /**
   * The controller queues a node for the NoExecute taint in the very pass it marks the node Unknown (true: fixed
   * upstream by kubernetes#120816, seen on 1.34 and 1.37), or one monitor period later, when it reads the Ready
   * condition it wrote (false: seen on 1.20). See versions.ts; undefined is taken as true, the earlier of the two.
   */
  taintsInTheSamePass?: boolean;
  /** Keep only the first n pods in `pods` (by eviction time; atRisk, nodesAtRisk and earliest count them all). */
  podsKept?: number;
  /** Report only the first n nodes in `nodes` (by name; all of them are judged, and counted in nodeCount). */
  nodesKept?: number;
}

/**
 * Nodes column by column, node i at index i of each column, in name order: what the probe's feed hands the forecast
 * without an object per node. Times in ms; NaN stands for none.
 */
export interface NodeColumns {
  count: number;
  name: readonly string[];
  zone: readonly string[];
  /** 1: labelled node.kubernetes.io/exclude-disruption. */
  excluded: Uint8Array;
  created: Float64Array;
  /** The Ready condition's status; undefined: no Ready condition (heartbeat and transition are NaN then). */
  status: readonly (ConditionStatus | undefined)[];
  heartbeat: Float64Array;
  transition: Float64Array;
  leaseRenew: Float64Array;
  taints: readonly (readonly SlimTaint[])[];
  taintedSince: Float64Array;
}

/** The nodes given, column by column, in the order given. */
export function columnsOf(nodes: readonly ForecastNode[]): NodeColumns {
  const times = (pick: (n: ForecastNode) => number | undefined) => Float64Array.from(nodes, (n) => pick(n) ?? NaN);
  return {
    count: nodes.length,
    name: nodes.map((n) => n.name),
    zone: nodes.map((n) => n.zone),
    excluded: Uint8Array.from(nodes, (n) => (n.excluded ? 1 : 0)),
    created: times((n) => n.created),
    status: nodes.map((n) => n.ready?.status),
    heartbeat: times((n) => n.ready?.heartbeat),
    transition: times((n) => n.ready?.transition),
    leaseRenew: times((n) => n.leaseRenew),
    taints: nodes.map((n) => n.taints),
    taintedSince: times((n) => n.taintedSince),
  };
}

/** A forecast's input with the nodes in columns (the feed's), their pods asked for by the node's index in them. */
export interface ColumnsInput extends Omit<ForecastInput, 'nodes' | 'podsOn'> {
  nodes: NodeColumns;
  podsOn(node: number): readonly PodGroup[];
}

export type ZoneState = 'Normal' | 'PartialDisruption' | 'FullDisruption';

export interface NodeForecast {
  name: string;
  zone: string;
  lastHeartbeat?: number;
  /** Heartbeats have stopped: older than silentAfter. */
  silent: boolean;
  /** Ready is not True now. */
  notReady: boolean;
  /** When it went NotReady (observed), or the earliest time it will if no heartbeat comes (predicted). */
  notReadyAt?: number;
  /** The NoExecute taint: when it was added, or the earliest time it can be; absent when it will not be. */
  taintAt?: number;
  tainted: boolean;
  /** Why no taint is coming although the node is silent or NotReady. */
  held?: string;
  /** Tainted although every zone is down: the controller did not remove this taint and will not. */
  keepsTaint?: boolean;
}

export interface ZoneForecast {
  zone: string;
  size: number;
  notReadyNow: number;
  stateNow: ZoneState;
}

export interface Forecast {
  at: number;
  /** The nodes passed in `nodes`, by name (the first nodesKept of them). */
  nodes: NodeForecast[];
  /** How many nodes were passed. */
  nodeCount: number;
  /** Pods on nodes that are silent, NotReady or tainted, by eviction time (the first `podsKept` of them). */
  pods: PodForecast[];
  zones: ZoneForecast[];
  /** Every zone fully disrupted: the controller removes taints and evicts nothing. `now` when already so. */
  masterDisruptionAt?: number;
  earliest?: { at: number; pod: string; node: string };
  /** Pods with a predicted eviction, and the nodes they are on. */
  atRisk: number;
  nodesAtRisk: number;
  /** No controller-manager is leading: evictions are frozen. */
  frozen: boolean;
  /** When a taint still on a node is to be taken as kept (every zone down), if that is still to come: judge again then. */
  keepsTaintsFrom?: number;
}

const NEVER = Infinity;

export function defaultSilentAfter(s: LifecycleSettings): number {
  const renew = s.leaseDurationMs / 4;
  return Math.max(renew * 2, renew + 2000);
}

/** The later of its lease renewal and its Ready heartbeat; its creation when it has neither. */
export function lastHeartbeatOf(n: Pick<ForecastNode, 'ready' | 'created'>, renew: number | undefined): number | undefined {
  return latestHeartbeat(renew, n.ready?.heartbeat, n.created);
}

/** lastHeartbeatOf from its parts: the lease renewal, the Ready condition's heartbeat, the creation. */
function latestHeartbeat(renew: number | undefined, beat: number | undefined, created: number | undefined): number | undefined {
  return renew === undefined ? (beat ?? created) : beat === undefined ? renew : Math.max(renew, beat);
}

/**
 * Whether the forecast can predict anything for this node now (its lease renewed at `renew`): silent, not Ready, or
 * with the controller's NoExecute taint. Nodes that are not failing can go to `healthy` as counts.
 */
export function isFailing(n: Pick<ForecastNode, 'ready' | 'created' | 'taints'>, renew: number | undefined, now: number, silentAfter: number): boolean {
  const last = lastHeartbeatOf(n, renew);
  return !isSound(n) || last === undefined || now - last > silentAfter;
}

/** Ready and without the controller's NoExecute taint: failing only once it falls silent. */
export function isSound(n: Pick<ForecastNode, 'ready' | 'taints'>): boolean {
  return n.ready?.status === 'True' && !n.taints.some(isControllerTaint);
}

/** The node lifecycle controller's NoExecute taint (not-ready or unreachable). */
export const isControllerTaint = (t: SlimTaint): boolean => t.effect === 'NoExecute' && (t.key === UNREACHABLE || t.key === NOT_READY);

export function zoneStateOf(notReady: number, size: number, threshold: number): ZoneState {
  const ready = size - notReady;
  if (ready === 0 && notReady > 0) return 'FullDisruption';
  if (notReady > 2 && notReady / size >= threshold) return 'PartialDisruption';
  return 'Normal';
}

/** What a node's flags in a judgement say (Judged.flags). */
const SILENT = 1;
const NOT_READY_NOW = 2;
const TAINTED = 4;
const EXCLUDED = 8;
const KEEPS_TAINT = 16;
const FAILING = SILENT | NOT_READY_NOW | TAINTED;

/** Why a node's taint is not coming (Judged.held): none, or one of these. */
const HELD = ['', 'all zones disrupted: evictions stopped', 'zone partially disrupted: tainting stopped'] as const;

/**
 * What a judgement works out per node, by the node's place in name order, in typed arrays rather than an object per
 * node: with thousands of nodes failing at once a judgement is bound by reading memory, and each pass below reads
 * only the few numbers it needs, side by side. Times are in ms; NaN stands for none.
 */
class Judged {
  readonly flags: Uint8Array;
  readonly held: Uint8Array;
  /** The node's zone, an index into the judgement's zone names. */
  readonly zone: Int32Array;
  readonly lastHeartbeat: Float64Array;
  readonly notReadyAt: Float64Array;
  /** Earliest and latest moment the controller can see the node NotReady (NEVER: stays Ready). */
  readonly downEarly: Float64Array;
  readonly downLate: Float64Array;
  /** The earliest and the latest moment it can be queued for the NoExecute taint. */
  readonly eligible: Float64Array;
  readonly eligibleLate: Float64Array;
  /** When its NoExecute taint was added, or can be at the earliest. */
  readonly taintAt: Float64Array;
  /** The controller's NoExecute taint on it, had or to come. */
  readonly controllerTaint: (SlimTaint | undefined)[];

  constructor(n: number) {
    const bytes = new ArrayBuffer(n * (7 * 8 + 4 + 2));
    const times = (k: number) => new Float64Array(bytes, k * n * 8, n);
    [this.lastHeartbeat, this.notReadyAt, this.downEarly, this.downLate, this.eligible, this.eligibleLate, this.taintAt] = [0, 1, 2, 3, 4, 5, 6].map(times) as [Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array];
    this.zone = new Int32Array(bytes, 7 * n * 8, n);
    this.flags = new Uint8Array(bytes, 7 * n * 8 + 4 * n, n);
    this.held = new Uint8Array(bytes, 7 * n * 8 + 5 * n, n);
    this.controllerTaint = new Array<SlimTaint | undefined>(n);
  }
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
  return forecastColumns({ ...input, nodes: columnsOf(nodes), podsOn: (i) => input.podsOn(nodes[i]!) });
}

/** The forecast of nodes in columns, in name order. */
export function forecastColumns(input: ColumnsInput): Forecast {
  const { now, settings: s } = input;
  const silentAfter = input.silentAfterMs ?? defaultSilentAfter(s);
  const taintDelay = input.taintsInTheSamePass === false ? s.nodeMonitorPeriodMs : 0;
  const c = input.nodes;
  const n = c.count;
  const j = new Judged(n);
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
  const byZone = new Int32Array(n);
  const filled = zoneStart.slice(0, zoneNames.length);
  for (let i = 0; i < n; i++) byZone[filled[j.zone[i]!]!++] = i;

  // Zones: only nodes not excluded from disruption checks count, the healthy ones by number. How many of a zone's
  // nodes are NotReady at t, surely (late bound) and possibly (early bound): the moments each node goes down are
  // sorted once per zone, so a count is a binary search, not a pass over the zone's nodes.
  const zoneOf: (Zone | undefined)[] = [];
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
    const late = new Float64Array(passed);
    const early = new Float64Array(passed);
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
    const ahead = new SortedByLate(members.length);
    let queued = 0;
    const queue = new Int32Array(members.length);
    for (const i of members) {
      if (j.flags[i]! & TAINTED) {
        if (fastest > 0) ahead.add(-NEVER, j.taintAt[i]! + 1000 / fastest);
      } else if (Number.isFinite(j.eligible[i]!)) queue[queued++] = i;
    }
    // by the moment each becomes eligible, then by name
    const eligible = j.eligible;
    const when = new Float64Array(queued);
    for (let k = 0; k < queued; k++) when[k] = eligible[queue[k]!]!;
    const order = ascending(when).map((k) => queue[k]!);
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
  // do: resources.ts interns them): thousands of pods on a node are a handful of verdicts.
  const cutoff = masterAt ?? NEVER;
  const frozen = input.controllerRunning === false;
  let atRisk = 0;
  let nodesAtRisk = 0;
  let earliest: Forecast['earliest'];
  const pods = new FirstPods(input.podsKept ?? Infinity);
  // toleration times by tolerations array, for nodes whose only NoExecute taint is one of the controller's
  const tolerated = new Map([NOT_READY_TAINTS, UNREACHABLE_TAINTS].map((taints) => [taints, new Map<SlimToleration[], number>()]));
  for (let i = 0; i < n; i++) {
    if (!(j.flags[i]! & FAILING)) continue;
    const groups = input.podsOn(i);
    if (groups.length === 0) continue;
    const taintAt = j.taintAt[i]!;
    const keepsTaint = (j.flags[i]! & KEEPS_TAINT) !== 0;
    const taints = noExecuteOn(c.taints[i]!, j.controllerTaint[i]);
    const known = tolerated.get(taints);
    let nodeAtRisk = false;
    for (const g of groups) {
      if (g.keys.length === 0) continue;
      let tol = known?.get(g.tolerations);
      if (tol === undefined) {
        tol = tolerationMs(g.tolerations, taints);
        known?.set(g.tolerations, tol);
      }
      const outcome = outcomeOf(taintAt, keepsTaint, tol, cutoff, frozen);
      const at = evictsAt(outcome, taintAt, tol);
      pods.offer(g.keys, at, i, tol, outcome);
      if (at === NEVER) continue;
      atRisk += g.keys.length;
      nodeAtRisk = true;
      // the earliest eviction, and of pods evicted at that moment the first by key
      if (!earliest || at < earliest.at || (at === earliest.at && g.keys[0]! < earliest.pod)) earliest = { at, pod: g.keys[0]!, node: c.name[i]! };
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

/**
 * The places 0..n-1 of `keys` in ascending order of key, equal keys in order of place (a stable sort): the keys sorted
 * natively and each one's place found by a binary search, which at thousands of keys costs a fraction of a sort that
 * calls back for every comparison.
 */
function ascending(keys: Float64Array): Int32Array {
  const sorted = keys.slice().sort();
  // how many keys equal to the one first at each place have been placed
  const placed = new Int32Array(keys.length);
  const order = new Int32Array(keys.length);
  for (let k = 0; k < keys.length; k++) {
    const first = countBelow(sorted, keys[k]!);
    order[first + placed[first]!++] = k;
  }
  return order;
}

/** How many of the sorted `xs` are below t. */
function countBelow(xs: ArrayLike<number>, t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How many of the sorted `xs` are at most t. */
function countAtMost(xs: ArrayLike<number>, t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first of the sorted `ts` after `from`. */
const firstAfter = (ts: ArrayLike<number>, from: number): number | undefined => ts[countAtMost(ts, from)];

/** The fewest NotReady nodes that make a zone of `size` partially disrupted (more than 2, and the threshold). */
function firstPartialCount(size: number, threshold: number): number {
  let k = Math.max(3, Math.ceil(threshold * size));
  while (k > 3 && (k - 1) / size >= threshold) k--;
  while (k / size < threshold) k++;
  return k;
}

/** Entries (late, next) taken in order of `late`: the largest `next` of those whose `late` is before a moment. */
class SortedByLate {
  private readonly lates: Float64Array;
  private readonly nexts: Float64Array;
  private size = 0;
  private taken = 0;
  private best = -NEVER;

  /** At most `capacity` entries are added. */
  constructor(capacity: number) {
    this.lates = new Float64Array(capacity);
    this.nexts = new Float64Array(capacity);
  }

  add(late: number, next: number): void {
    if (this.taken > 0 && late < this.lates[this.taken - 1]!) {
      // before what was already taken: it counts from now on
      this.best = Math.max(this.best, next);
      return;
    }
    // nodes come in the order they become eligible, so mostly after the others
    let i = this.size;
    while (i > this.taken && this.lates[i - 1]! > late) i--;
    if (i < this.size) {
      this.lates.copyWithin(i + 1, i, this.size);
      this.nexts.copyWithin(i + 1, i, this.size);
    }
    this.lates[i] = late;
    this.nexts[i] = next;
    this.size++;
  }

  /** The largest `next` of the entries whose `late` < t; t never decreases from one call to the next. */
  latestNextBefore(t: number): number {
    while (this.taken < this.size && this.lates[this.taken]! < t) this.best = Math.max(this.best, this.nexts[this.taken++]!);
    return this.best;
  }
}

/** The taint the controller puts on a node it sees NotReady (Ready=False) or Unknown; shared, never changed. */
const NOT_READY_TAINT: Readonly<SlimTaint> = Object.freeze({ key: NOT_READY, effect: 'NoExecute' });
const UNREACHABLE_TAINT: Readonly<SlimTaint> = Object.freeze({ key: UNREACHABLE, effect: 'NoExecute' });

const NOT_READY_TAINTS: readonly SlimTaint[] = Object.freeze([NOT_READY_TAINT]);
const UNREACHABLE_TAINTS: readonly SlimTaint[] = Object.freeze([UNREACHABLE_TAINT]);
const NO_TAINTS: readonly SlimTaint[] = Object.freeze([]);

/** The NoExecute taints a failing node's pods are judged on: its own, and the controller's (`c`), had or to come. */
function noExecuteOn(taints: readonly SlimTaint[], c: SlimTaint | undefined): readonly SlimTaint[] {
  let own: SlimTaint[] | undefined;
  for (const t of taints) if (t.effect === 'NoExecute' && !isControllerTaint(t)) (own ??= []).push(t);
  if (!c) return own ?? NO_TAINTS;
  // the usual case: one of two arrays shared by every node, so that toleration times are worked out once for all
  if (!own && c.value === undefined) return c.key === NOT_READY ? NOT_READY_TAINTS : UNREACHABLE_TAINTS;
  return [...(own ?? []), c];
}

/** Works out node `i`'s times and flags in `j`. */
function judgeNode(j: Judged, i: number, c: NodeColumns, now: number, s: LifecycleSettings, silentAfter: number, taintDelay: number): void {
  const P = s.nodeMonitorPeriodMs;
  const status = c.status[i];
  const transition = Number.isNaN(c.transition[i]!) ? now : c.transition[i]!;
  // lastHeartbeatOf, on the columns
  const renew = c.leaseRenew[i]!;
  const beat = c.heartbeat[i]!;
  const last = Number.isNaN(renew) ? (Number.isNaN(beat) ? c.created[i]! : beat) : Number.isNaN(beat) ? renew : Math.max(renew, beat);
  const lastHeartbeat = Number.isNaN(last) ? undefined : last;
  const grace = status !== undefined ? s.nodeMonitorGracePeriodMs : s.nodeStartupGracePeriodMs;
  const silent = lastHeartbeat === undefined || now - lastHeartbeat > silentAfter;
  const notReady = status !== 'True';
  let controllerTaintNow: SlimTaint | undefined;
  for (const t of c.taints[i]!)
    if (isControllerTaint(t)) {
      controllerTaintNow = t;
      break;
    }
  j.flags[i] = (silent ? SILENT : 0) | (notReady ? NOT_READY_NOW : 0) | (controllerTaintNow ? TAINTED : 0) | (c.excluded[i] ? EXCLUDED : 0);
  j.lastHeartbeat[i] = lastHeartbeat ?? NaN;
  const since = c.taintedSince[i]!;
  j.taintAt[i] = controllerTaintNow ? (Number.isNaN(since) ? (controllerTaintNow.timeAdded ?? now) : since) : NaN;
  const predictedDown = (lastHeartbeat ?? now) + grace;
  j.notReadyAt[i] = notReady ? transition : predictedDown;
  let downEarly = NEVER;
  let downLate = NEVER;
  let eligible = NEVER;
  if (notReady) {
    // Counted NotReady from now on; with heartbeats back (Unknown but renewing) it may turn Ready any moment.
    downEarly = -NEVER;
    downLate = silent || status === 'False' ? -NEVER : NEVER;
    // Ready=False is queued for the taint at once; Unknown at once too, or one pass after the controller set it on
    // versions that read back the condition they wrote (taintDelay)
    eligible = transition + (status === 'False' ? 0 : taintDelay);
  } else if (silent) {
    downEarly = Math.max(predictedDown, now);
    downLate = Math.max(predictedDown + 2 * P + 1000, now);
    eligible = downEarly + taintDelay;
  }
  j.downEarly[i] = downEarly;
  j.downLate[i] = downLate;
  j.eligible[i] = eligible;
  j.eligibleLate[i] = Number.isFinite(downLate) && !notReady ? downLate + taintDelay : eligible;
  j.controllerTaint[i] = controllerTaintNow ?? (notReady || silent ? (status === 'False' ? NOT_READY_TAINT : UNREACHABLE_TAINT) : undefined);
}

/** Node `i` as the forecast reports it. */
function nodeForecast(j: Judged, i: number, c: NodeColumns): NodeForecast {
  const flags = j.flags[i]!;
  const last = j.lastHeartbeat[i]!;
  const taintAt = j.taintAt[i]!;
  const f: NodeForecast = {
    name: c.name[i]!,
    zone: c.zone[i]!,
    lastHeartbeat: Number.isNaN(last) ? undefined : last,
    silent: (flags & SILENT) !== 0,
    notReady: (flags & NOT_READY_NOW) !== 0,
    tainted: (flags & TAINTED) !== 0,
    taintAt: Number.isNaN(taintAt) ? undefined : taintAt,
    notReadyAt: j.notReadyAt[i]!,
  };
  if (flags & KEEPS_TAINT) f.keepsTaint = true;
  if (j.held[i]) f.held = HELD[j.held[i]!];
  return f;
}
