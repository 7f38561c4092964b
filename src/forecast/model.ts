import { byCodeUnit } from '../core/order.js';
import type { SlimTaint, SlimToleration } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import type { LifecycleSettings } from '../kube/versions.js';

export type { LifecycleSettings };

/** A time that never comes (epoch milliseconds): a node that is never tainted, a pod that is never evicted. */
export const NEVER = Infinity;

/*
 * What the eviction forecast (forecast.ts) reads and reports, and the rules for a node's heartbeat it shares with
 * the probe's feed. Times are epoch milliseconds.
 */

/** A node as the forecast reads it: the Node's Ready condition and taints, and its Lease's last renewal. */
export interface ForecastNode {
  name: string;
  zone: string;
  /** Labelled node.kubernetes.io/exclude-disruption: not counted in zone states. */
  excluded?: boolean;
  created?: number;
  ready?: { status: 'True' | 'False' | 'Unknown'; heartbeat?: number; transition?: number };
  leaseRenew?: number;
  taints: readonly SlimTaint[];
  /**
   * Its pods that can be evicted, grouped (see groupPods); none when left out. Read only on failing nodes. Never
   * changed in place: a new array when a pod comes or goes, so that a store keeps what a judgement made of the last.
   */
  pods?: readonly PodGroup[];
  /**
   * Since when its NoExecute taint has been on without a break. The controller re-adds the taint with a new
   * timeAdded while the node stays down, but the taint manager keeps the eviction time it scheduled first.
   */
  taintedSince?: number;
}

/*
 * A node as one judgement works it out, by concern, in the controller's order: its health (health.ts), its NoExecute
 * taint had or to come (health.ts), its place in its zone's taint queue (taint-queue.ts), its pods by how long they
 * tolerate that taint (taint-manager.ts). Each part is written by the module named and read only by the others. The
 * parts are the interfaces of one row, not objects of their own: at thousands of failing nodes a part a pointer away
 * cost a tenth of a judgement. The rows are the judging memory a ForecastStore keeps from one judgement to the next
 * (store.ts), never the forecast's input.
 */

/** A node's heartbeat and health now, and the moments the controller can mark it NotReady and queue it. */
export interface NodeHealth {
  /** Its times are NaN where there is none: a field that only ever holds numbers keeps its box when rewritten. */
  readonly lastHeartbeat: number;
  readonly silent: boolean;
  readonly notReady: boolean;
  /** When it went NotReady (observed), or the earliest moment it will (predicted). */
  readonly notReadyAt: number;
  /** Earliest and latest moment the controller counts it NotReady (NEVER: stays Ready); its transition when it is already. */
  readonly downEarly: number;
  readonly downLate: number;
  /** The earliest moment it can be queued for the NoExecute taint (NEVER: not). */
  readonly queuedFrom: number;
  /** The moment it is surely queued (NEVER: it may never be, its heartbeats back). */
  readonly queuedBy: number;
}

/** The controller's NoExecute taint of a node: the one it has, since when, and the one it has or will get. */
export interface NodeTaints {
  /** The controller's NoExecute taint on it now. */
  readonly taintNow?: SlimTaint;
  /** Since when it has had that taint (the taint manager's start); NaN: not tainted. */
  readonly taintedAt: number;
  /** The taint it has or will get: unreachable for Unknown, not-ready for False; none while it is not failing. */
  readonly taintComing?: SlimTaint;
}

/** A node's NoExecute taint as its zone's queue hands it out (taint-queue.ts), or why none is coming. */
export interface QueueState {
  /** The earliest and the likely moment of its taint; NaN: none coming. */
  taintAt: number;
  taintLikely: number;
  held?: string;
  /** Tainted although every zone is down: the controller did not remove this taint and will not. */
  keepsTaint: boolean;
}

/**
 * A node's pods by how long they tolerate the taints they are judged on (podTimesOf, taint-manager.ts), worked out
 * from one pod groups array and one taints array and kept while the node has both. What a judgement needs of a node
 * whose pods cannot be the first reported: pods at risk are those of a prefix (the longer a toleration, the later the
 * eviction). Most failing nodes are judged on these alone.
 */
export interface PodTimes {
  /** The arrays they were worked out from: its pod groups and the taints. */
  readonly timesOf: readonly PodGroup[];
  readonly timesFor: readonly SlimTaint[];
  /** The toleration times ascending (NEVER last), each followed by how many pods the groups up to it hold. */
  readonly times: readonly number[];
  /** How many pods it has, and how many of them tolerate the taints for a while only (not forever). */
  readonly podCount: number;
  readonly podsForAWhile: number;
  /** The shortest and the longest toleration time short of forever (NEVER: none). */
  readonly shortest: number;
  readonly longest: number;
  /** The first key of the pods that tolerate for the shortest time. */
  readonly firstKey: string;
}

/** One node in a judgement: who and where it is (its ForecastNode), and the parts worked out of it. */
export interface NodeRow extends NodeHealth, NodeTaints, QueueState, PodTimes {
  readonly node: ForecastNode;
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
  tolerations: readonly SlimToleration[];
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
  return [...groups].flatMap(([node, byTolerations]) =>
    [...byTolerations].map(([tolerations, keys]) => ({ node, tolerations, keys: keys.sort(byCodeUnit) })),
  );
}

/** The kube-controller-manager the forecast predicts for. */
export interface ControllerState {
  /** false while no kube-controller-manager holds its leader lease: nothing is tainted or evicted. */
  running?: boolean;
  /**
   * When the current leader took its lease. A new leader remembers nothing: it gives every node its grace period
   * from its first pass, queues the nodes already NotReady afresh, and its taint manager counts tolerations from
   * when it first sees a taint.
   */
  since?: number;
  /** Why pods are not evicted although nodes are tainted: the taint-eviction controller is off. */
  evictionsOff?: string;
  /** Why it is not running, when known (stopped by this run, say); else the leader lease is named. */
  stoppedBecause?: string;
}

export interface ForecastInput {
  now: number;
  settings: LifecycleSettings;
  /**
   * The nodes, each name once. Nodes that are not failing may be left out and counted in `healthy` instead. Never
   * changed in place (a node's fields may change, not its name, zone or exclusion): a store keeps how a judgement laid
   * out an array of nodes for the next judgement of the same array.
   */
  nodes: readonly ForecastNode[];
  /**
   * Nodes left out of `nodes` because nothing can be predicted for them now, counted by zone: Ready, heartbeating
   * within silentAfterMs, without the controller's NoExecute taint, and not labelled exclude-disruption. They count in
   * their zone's size and nowhere else; the caller judges again when the first of them may go silent.
   */
  healthy?: ReadonlyMap<string, number>;
  /** A node whose last heartbeat is older than this is taken as silent (it will not renew again). */
  silentAfterMs?: number;
  controller?: ControllerState;
  /**
   * The controller queues a node for the NoExecute taint in the very pass it marks the node Unknown (true: fixed
   * upstream by kubernetes#120816, seen on 1.34 and 1.37), or one monitor period later, when it reads the Ready
   * condition it wrote (false: seen on 1.20). undefined is taken as true, the earlier of the two.
   */
  taintsInTheSamePass?: boolean;
  /**
   * The controller removes and re-adds every untainted NotReady node to its zone's queue in each pass, in the order its
   * parallel workers reach them (true: 1.21 and later), or keeps each node where it was first queued (false: 1.20).
   * Either way the bound a guard reads is the same; this sets the likely moment.
   */
  requeuesEveryPass?: boolean;
  /** Keep only the first n pods in `pods` (by eviction time; atRisk, nodesAtRisk and earliest count them all). */
  podsKept?: number;
  /** Report only the first n nodes in `nodes` (by name; all of them are judged, and counted in nodeCount). */
  nodesKept?: number;
  /** List in `pods` only pods with a predicted eviction (the first podsKept of those). */
  evictedPodsOnly?: boolean;
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
  /**
   * The NoExecute taint: when it was added, or the earliest moment it can be (any node queued in a zone may get the
   * zone's next token); absent when it will not be.
   */
  taintAt?: number;
  /** When it is likely to be tainted: its place in the queue as the release orders it. */
  taintLikely?: number;
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

/** A pod's prediction. */
export interface PodForecast {
  key: string;
  node: string;
  /** Earliest eviction; absent: not predicted (tolerated forever, node not failing, or evictions stopped). */
  evictAt?: number;
  /** The likely eviction, from the node's likely taint. */
  evictLikely?: number;
  why: string;
}

export interface Forecast {
  at: number;
  /** The failing nodes passed in `nodes`, by name (the first nodesKept of them); healthy ones too when passed. */
  nodes: NodeForecast[];
  /** How many nodes were passed. */
  nodeCount: number;
  /** Pods on nodes that are silent, NotReady or tainted, by eviction time (the first `podsKept` of them). */
  pods: PodForecast[];
  zones: ZoneForecast[];
  /** Every zone fully disrupted for sure: the controller removes taints and evicts nothing. `now` when already so. */
  masterDisruptionAt?: number;
  /**
   * The first pod evicted, at the earliest; `likely`: that pod's likely eviction, absent when it is likely spared;
   * `cause`: set when it is not a node's NoExecute taint (a device taint, device-taints.ts).
   */
  earliest?: { at: number; pod: string; node: string; likely?: number; cause?: string };
  /** Pods with a predicted eviction, and the nodes they are on. */
  atRisk: number;
  nodesAtRisk: number;
  /** No pod is evicted while the controller is as it is now: why (no leader, taint eviction off); else absent. */
  frozen?: string;
  /** When a taint still on a node is to be taken as kept (every zone down), if that is still to come: judge again then. */
  keepsTaintsFrom?: number;
}

/**
 * How long without a heartbeat before a node is taken as silent: its lease's duration (when the kubelet itself takes
 * its lease as expired), but at least two renewals and a margin, and no later than a renewal before its grace runs
 * out. Shorter than the lease, every node counted as failing after a short outage of the apiserver (40 s leases,
 * renewed every 10 s, failing after 20 s).
 */
export function defaultSilentAfter(s: LifecycleSettings): number {
  const renew = s.leaseDurationMs / 4;
  return Math.max(renew + 2000, Math.min(s.leaseDurationMs, s.nodeMonitorGracePeriodMs - renew));
}

/** The later of its lease renewal and its Ready heartbeat; its creation when it has neither. */
export function lastHeartbeatOf(n: Pick<ForecastNode, 'ready' | 'created'>, renew: number | undefined): number | undefined {
  return latestHeartbeat(renew, n.ready?.heartbeat, n.created);
}

function latestHeartbeat(renew: number | undefined, beat: number | undefined, created: number | undefined): number | undefined {
  return renew === undefined ? (beat ?? created) : beat === undefined ? renew : Math.max(renew, beat);
}

/**
 * Whether the forecast can predict anything for this node now (its lease renewed at `renew`): silent, not Ready, or
 * with the controller's NoExecute taint. Nodes that are not failing can go to `healthy` as counts.
 */
export function isFailing(
  n: Pick<ForecastNode, 'ready' | 'created' | 'taints'>,
  renew: number | undefined,
  now: number,
  silentAfter: number,
): boolean {
  const last = lastHeartbeatOf(n, renew);
  return !isSound(n) || last === undefined || now - last > silentAfter;
}

/** Ready and without the controller's NoExecute taint: failing only once it falls silent. */
export function isSound(n: Pick<ForecastNode, 'ready' | 'taints'>): boolean {
  return n.ready?.status === 'True' && !n.taints.some(isControllerTaint);
}

/** The node lifecycle controller's NoExecute taint (not-ready or unreachable). */
export const isControllerTaint = (t: SlimTaint): boolean => t.effect === 'NoExecute' && (t.key === UNREACHABLE || t.key === NOT_READY);
