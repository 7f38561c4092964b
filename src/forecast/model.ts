import { byCodeUnit } from '../core/order.js';
import type { ConditionStatus, SlimTaint, SlimToleration } from '../kube/resources.js';
import type { PodForecast } from './pods.js';
import type { ForecastScratch } from './scratch.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import type { LifecycleSettings } from '../kube/versions.js';

export type { LifecycleSettings };

/*
 * What the eviction forecast (forecast.ts) reads and reports, and the rules for a node's heartbeat it shares with
 * the probe's feed.
 */

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
   * A node's pods that can be evicted, grouped (see groupPods); asked for each node in `nodes` (whose names are
   * unique), with the node as passed there. Only those of failing nodes (silent, NotReady or tainted) are judged.
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
  /** List in `pods` only pods with a predicted eviction (the first podsKept of those). */
  evictedPodsOnly?: boolean;
  /** Memory to judge in, kept by a caller from one judgement to the next; else the judgement makes its own. */
  scratch?: ForecastScratch;
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

/**
 * The nodes' pods in groups (PodGroup) as numbers: node i's groups are start[i] to start[i + 1] - 1, each with its
 * pods counted, its tolerations array by number and its first key. A judgement reads these side by side; it asks for a
 * group's keys only when its first pod is among those reported, a few groups of thousands.
 */
export interface PodColumns {
  /** Per node, where its groups start; one more entry than nodes. */
  start: Int32Array;
  /** Per group, its number of pods (1 or more). */
  size: Int32Array;
  /** Per group, its tolerations: an index into `tolerations`. */
  tolerationsId: Int32Array;
  tolerations: readonly (readonly SlimToleration[] | undefined)[];
  /** Per group, its first key by code unit. */
  first: readonly string[];
  /** A group's pod keys, sorted by code unit. */
  keys(group: number): readonly string[];
}

/** The pods of `count` nodes in columns, node i's groups from podsOn(i) (empty groups left out). */
export function podColumnsOf(count: number, podsOn: (node: number) => readonly PodGroup[]): PodColumns {
  const ids = new Map<readonly SlimToleration[], number>();
  const tolerations: (readonly SlimToleration[])[] = [];
  const start = new Int32Array(count + 1);
  const groups: PodGroup[] = [];
  for (let i = 0; i < count; i++) {
    for (const g of podsOn(i)) if (g.keys.length > 0) groups.push(g);
    start[i + 1] = groups.length;
  }
  const idOf = (t: readonly SlimToleration[]) => {
    let id = ids.get(t);
    if (id === undefined) ids.set(t, (id = tolerations.push(t) - 1));
    return id;
  };
  return {
    start,
    size: Int32Array.from(groups, (g) => g.keys.length),
    tolerationsId: Int32Array.from(groups, (g) => idOf(g.tolerations)),
    tolerations,
    first: groups.map((g) => g.keys[0]!),
    keys: (group) => groups[group]!.keys,
  };
}

/** A forecast's input with the nodes in columns (the feed's) and their pods in columns by the nodes' indexes. */
export interface ColumnsInput extends Omit<ForecastInput, 'nodes' | 'podsOn'> {
  nodes: NodeColumns;
  /** The pods of the nodes in `nodes`; only those of failing nodes are read. */
  pods: PodColumns;
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

/** latestHeartbeat on columns' numbers, NaN standing for none (and returned when there is none). */
export function latestHeartbeatOrNaN(renew: number, beat: number, created: number): number {
  return Number.isNaN(renew) ? (Number.isNaN(beat) ? created : beat) : Number.isNaN(beat) ? renew : Math.max(renew, beat);
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
