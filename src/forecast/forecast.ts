import { byCodeUnit } from '../core/order.js';
import type { SlimTaint } from '../kube/resources.js';
import { NOT_READY_TAINT, UNREACHABLE_TAINT, isFailingRow, nodeHealth } from './health.js';
import {
  type Forecast,
  type ForecastInput,
  type NodeForecast,
  type NodeRow,
  type PodGroup,
  defaultSilentAfter,
  isControllerTaint,
} from './model.js';
import { ForecastStore } from './store.js';
import { FirstPods, type MasterWindow, evictsAt, outcomeOf, podTimesOf } from './taint-manager.js';
import { queueTaints, unqueued } from './taint-queue.js';
import { Zone } from './zones.js';

export type {
  ControllerState,
  Forecast,
  ForecastInput,
  ForecastNode,
  ForecastPod,
  LifecycleSettings,
  NodeForecast,
  PodForecast,
  PodGroup,
  ZoneForecast,
  ZoneState,
} from './model.js';
import { NEVER } from './model.js';
export { defaultSilentAfter, groupPods, isFailing, lastHeartbeatOf } from './model.js';
export { ForecastStore } from './store.js';
export { zoneStateOf } from './zones.js';

/*
 * The eviction forecast: a model of the node lifecycle controller and the taint manager of kube-controller-manager
 * (pkg/controller/nodelifecycle, pkg/controller/tainteviction). From heartbeats, Ready conditions, taints, pods'
 * tolerations, zones and the controller's settings it predicts, per node, when it goes NotReady and gets the
 * NoExecute taint, and per pod the earliest moment it can be evicted. Wherever the real controller's timing is
 * not known (it works in monitor-period passes, its queues' order changes from pass to pass, rate limiters refill,
 * informers lag) the forecast takes the earliest moment the controller can act: it may be early, never late. Beside
 * that bound it gives the likely moment, so an operator sees the range.
 *
 * In the controller's order: node health (health.ts), zone states and master disruption (zones.ts), each zone's
 * taint queue (taint-queue.ts), the taint manager (taint-manager.ts).
 *
 * A judgement only reads its input. What it works out per node it writes into the rows of `store` (store.ts), the
 * judging memory its caller keeps from one judgement to the next (the feed's): with it, thousands of failing nodes
 * whose pods and taints did not change are judged without working their pods out again; without it, a judgement
 * starts from nothing. Either way the forecast is the same.
 */
export function forecast(input: ForecastInput, store: ForecastStore = new ForecastStore()): Forecast {
  const { now, settings: s } = input;
  const controller = input.controller ?? {};
  const leaderSince = controller.since ?? -NEVER;
  const health = {
    now,
    settings: s,
    silentAfter: input.silentAfterMs ?? defaultSilentAfter(s),
    queueDelay: input.taintsInTheSamePass === false ? s.nodeMonitorPeriodMs : 0,
    leaderSince,
  };
  const layout = store.layoutOf(input.nodes);
  const rows: readonly NodeRow[] = layout.rows;
  // a failing node's pods by toleration time, while the node is at hand
  for (const r of layout.rows) {
    nodeHealth(r, health);
    unqueued(r);
    if (isFailingRow(r)) podTimesOf(r, noExecuteOn(r), r.node.pods ?? NO_PODS, store.tolerated);
  }

  // zones: only nodes not excluded from disruption checks count in a zone's state, the healthy ones by number
  const zones = new Map<string, Zone>();
  for (const [name, z] of layout.zones) zones.set(name, new Zone(name, s, z.members, z.rows));
  for (const [name, healthy] of input.healthy ?? []) if (healthy > 0 && !zones.has(name)) zones.set(name, new Zone(name, s));
  for (const z of zones.values()) z.close(input.healthy?.get(z.name) ?? 0);
  const counted = [...zones.values()].filter((z) => z.size > 0);

  const master = masterWindow(counted);
  const masterAt = master.late === NEVER ? undefined : Math.max(now, master.late);
  const keepsTaintsFrom = keptTaints(rows, counted, master, now, s.nodeMonitorPeriodMs);

  // taints, zone by zone, while a controller leads
  if (controller.running !== false)
    for (const z of zones.values()) queueTaints(z, { now, cutoff: master.late, requeues: input.requeuesEveryPass !== false });

  // pods: only those of failing nodes can be evicted
  // why no pod is evicted: what the run itself holds applied first, then a missing leader (one restarting, say)
  const reasons = [
    controller.evictionsOff,
    controller.running === false ? (controller.stoppedBecause ?? 'no kube-controller-manager is leading') : undefined,
  ].filter((r) => r !== undefined);
  const frozen = reasons.length > 0 ? reasons.join('; ') : undefined;
  const pods = new FirstPods(input.podsKept ?? Infinity, input.evictedPodsOnly, frozen);
  const isFrozen = frozen !== undefined;
  let atRisk = 0;
  let nodesAtRisk = 0;
  let earliest: Forecast['earliest'];
  for (const r of rows) {
    if (!isFailingRow(r) || r.podCount === 0) continue;
    // the pods at risk: the groups up to the last one evicted, by toleration time; most often all or none of them
    const first = evictionOf(r, r.shortest, master, isFrozen, leaderSince);
    if (first !== NEVER) {
      nodesAtRisk++;
      if (evictionOf(r, r.longest, master, isFrozen, leaderSince) !== NEVER) atRisk += r.podsForAWhile;
      else {
        const times = r.times;
        let risky = 2;
        while (evictionOf(r, times[risky]!, master, isFrozen, leaderSince) !== NEVER) risky += 2;
        atRisk += times[risky - 1]!;
      }
    }
    // group by group only where a pod may be reported or be the first evicted: a few nodes of thousands
    const soonest = first !== NEVER && (!earliest || first < earliest.at || (first === earliest.at && r.firstKey < earliest.pod));
    if (!soonest && !pods.keeps(r.firstKey, first)) continue;
    const taints = r.timesFor;
    const { taintAt, taintLikely, keepsTaint } = r;
    for (const g of r.timesOf) {
      const tol = store.tolerated.of(taints, g.tolerations);
      const outcome = outcomeOf(taintAt, keepsTaint, tol, master, isFrozen, leaderSince);
      const at = evictsAt(outcome, taintAt, tol, leaderSince);
      // a group's first key is read only on a tie: most groups are judged by their time alone
      const sooner = at !== NEVER && (!earliest || at < earliest.at || (at === earliest.at && g.keys[0]! < earliest.pod));
      const kept = pods.keeps(g.keys[0]!, at);
      // the likely moment is worked out only for pods the forecast reports
      const likely =
        (kept || sooner) && !Number.isNaN(taintLikely)
          ? evictsAt(outcomeOf(taintLikely, keepsTaint, tol, master, isFrozen, leaderSince, true), taintLikely, tol, leaderSince)
          : NEVER;
      if (kept) pods.offer(g.keys, at, likely, r, tol, outcome);
      if (sooner) earliest = { at, pod: g.keys[0]!, node: r.node.name, ...(likely !== NEVER ? { likely } : {}) };
    }
  }
  const reported = rows.slice(0, input.nodesKept ?? rows.length).map(nodeForecast);
  return {
    at: now,
    nodes: reported,
    nodeCount: rows.length,
    pods: pods.sorted(),
    zones: counted
      .map((z) => ({ zone: z.name, size: z.size, notReadyNow: z.notReadyNow, stateNow: z.stateNow }))
      .sort((a, b) => byCodeUnit(a.zone, b.zone)),
    masterDisruptionAt: masterAt,
    earliest,
    atRisk,
    nodesAtRisk,
    ...(frozen !== undefined ? { frozen } : {}),
    keepsTaintsFrom,
  };
}

/** When pods of the row tolerating its taint for `tol` ms are evicted at the earliest; NEVER when not. */
function evictionOf(r: NodeRow, tol: number, master: MasterWindow, frozen: boolean, leaderSince: number): number {
  return evictsAt(outcomeOf(r.taintAt, r.keepsTaint, tol, master, frozen, leaderSince), r.taintAt, tol, leaderSince);
}

/**
 * When the controller may enter master disruption mode: once every zone has no Ready node. At the soonest when the
 * last node of the last zone may go down, at the latest when it surely has; never while a zone has a node that may
 * stay Ready. The pass that enters it lists the nodes at its start: a taint added during that pass stays.
 */
function masterWindow(zones: readonly Zone[]): MasterWindow {
  let early = zones.length > 0 ? -NEVER : NEVER;
  let late = early;
  for (const z of zones) {
    early = Math.max(early, z.possiblyAllDownAt);
    late = Math.max(late, z.surelyAllDownAt);
  }
  // the pass started before it reached the last node, and Ready transitions are stored to the second
  return { early, late, sticksFrom: early - 1000 };
}

/**
 * Taints still on nodes once every zone is down: entering master disruption mode the controller removed the taints
 * of the nodes as it listed them at the start of that pass; one added during the pass stays, and the taint manager
 * evicts on it. So a taint still there a while after every zone went down stays (Ready transitions are stored to the
 * second, and the pass takes time). Marks them kept; returns when to judge again if that while has not passed yet.
 */
function keptTaints(
  rows: readonly NodeRow[],
  zones: readonly Zone[],
  master: MasterWindow,
  now: number,
  period: number,
): number | undefined {
  if (master.late > now || !rows.some((r) => r.taintNow)) return undefined;
  let since = -NEVER;
  for (const z of zones) for (const r of z.rows) since = Math.max(since, r.node.ready?.transition ?? -NEVER);
  const keptAfter = since + 1000 + period;
  if (now < keptAfter) return keptAfter;
  for (const r of rows) if (r.taintNow) r.keepsTaint = true;
  return undefined;
}

const NO_TAINTS: readonly SlimTaint[] = Object.freeze([]);
const NO_PODS: readonly PodGroup[] = Object.freeze([]);
const NOT_READY_TAINTS: readonly SlimTaint[] = Object.freeze([NOT_READY_TAINT]);
const UNREACHABLE_TAINTS: readonly SlimTaint[] = Object.freeze([UNREACHABLE_TAINT]);

/** The NoExecute taints a failing node's pods are judged on: its own, and the controller's, had or to come. */
function noExecuteOn(r: NodeRow): readonly SlimTaint[] {
  let own: SlimTaint[] | undefined;
  for (const t of r.node.taints) if (t.effect === 'NoExecute' && !isControllerTaint(t)) (own ??= []).push(t);
  const c = r.taintComing;
  if (!c) return own ?? NO_TAINTS;
  // the usual case: one of two arrays shared by every node, so that toleration times are worked out once for all
  if (!own && c.value === undefined) return c.key === NOT_READY_TAINT.key ? NOT_READY_TAINTS : UNREACHABLE_TAINTS;
  return [...(own ?? []), c];
}

const orNone = (t: number): number | undefined => (Number.isNaN(t) ? undefined : t);

function nodeForecast(r: NodeRow): NodeForecast {
  const f: NodeForecast = {
    name: r.node.name,
    zone: r.node.zone,
    lastHeartbeat: orNone(r.lastHeartbeat),
    silent: r.silent,
    notReady: r.notReady,
    tainted: r.taintNow !== undefined,
    taintAt: orNone(r.taintAt),
    notReadyAt: r.notReadyAt,
  };
  if (!Number.isNaN(r.taintLikely) && r.taintLikely !== r.taintAt) f.taintLikely = r.taintLikely;
  else if (!Number.isNaN(r.taintAt)) f.taintLikely = r.taintAt;
  if (r.keepsTaint) f.keepsTaint = true;
  if (r.held) f.held = r.held;
  return f;
}
