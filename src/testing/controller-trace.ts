import { type ForecastNode, type ForecastPod, type PodGroup, forecast, groupPods } from '../forecast/forecast.js';
import type { SlimToleration } from '../kube/resources.js';
import { UNREACHABLE } from '../kube/tolerations.js';
import { type LifecycleSettings, parseKubeVersion, traitsOf } from '../kube/versions.js';
import { simulateController } from './controller-sim.js';

/*
 * A trace of the real node lifecycle controller, recorded on the lab (test/e2e/helpers/controller-recorder.ts) and
 * kept as a fixture (src/forecast/fixtures/real-controller-<release>-<scenario>.json): what it was given (settings,
 * nodes in zones, each stopped kubelet's last Lease renewal, pods and their tolerations) and what it did, with times.
 * `judgeTrace` replays the input through the controller stand-in (controller-sim.ts) and the eviction forecast and
 * says where either departs from the record: the record is the truth.
 */

export interface TraceNode {
  name: string;
  zone: string;
  /** Labelled node.kubernetes.io/exclude-disruption. */
  excluded?: boolean;
  /** A stopped kubelet's last Lease renewal (its renewTime, to the microsecond); absent: it kept renewing. */
  lastRenew?: number;
  /** When the recorder stopped it. */
  stoppedAt?: number;
}

export interface ControllerTrace {
  kind: 'kube-runbook/controller-trace';
  /** The server's gitVersion (`v1.37.2`). */
  release: string;
  scenario: string;
  settings: LifecycleSettings;
  /** The recording's span: from before the first kubelet stopped to its end. */
  start: number;
  end: number;
  nodes: TraceNode[];
  /** Pods on the nodes, and how long each tolerates the unreachable taint (null: forever). */
  pods: { key: string; node: string; tolerationMs: number | null }[];
  observed: {
    /** The Ready condition's move to Unknown: its lastTransitionTime (seconds) and when the watch saw it. */
    notReady: { node: string; transition: number; seenAt: number }[];
    /** The controller's log: each time a monitor pass added a node to the taint queue (1.20: every pass, until tainted). */
    queued: { node: string; at: number }[];
    /** Each NoExecute unreachable taint written (a new timeAdded), and when the watch saw it. */
    taints: { node: string; timeAdded: number; seenAt: number }[];
    /** Each removal of the taint, when the watch saw it. */
    untainted: { node: string; seenAt: number }[];
    /** Pods deleted by the taint manager: the controller's log line's time, or the watch's when no line named it. */
    evictions: { pod: string; at: number; seenAt: number }[];
    /** The controller's log: zone state changes and master disruption mode. */
    zoneStates: { zone: string; state: string; at: number }[];
    /** The controller's log: taint writes that failed (the pass tries again: a new timeAdded). Absent in older traces. */
    taintFailures?: { node: string; at: number }[];
  };
}

export interface TraceJudgement {
  /** Nodes tainted and pods evicted in the record. */
  tainted: string[];
  evicted: string[];
  /** Re-taints in the record (a node's taint written again with a new timeAdded while it stayed down). */
  retaints: number;
  /**
   * Of those, the ones the controller's log explains apart from 1.20's leftover queue entries: after a failed taint
   * write of that node (the tainting pass retries it), or after the node was queued again once its first taint was
   * written (a monitor pass that had listed the node before the taint landed: 1.34 and 1.37 remove and re-add a node
   * whose copy shows no taint; long passes, as at 1,000 nodes, make it likely). "After" is after the watch saw the
   * first taint (timeAdded is whole seconds, and each pass before the taint queues the node too).
   */
  retaintsExplained: number;
  /** Per seed of the stand-in: what it tainted, evicted and re-tainted, where its sets differ from the record. */
  sim: { seed: number; tainted: string[]; evicted: string[]; retaints: number }[];
  /** How many of those runs tainted and evicted exactly what the record did. */
  matching: number;
  /**
   * What a run of the stand-in tainted or evicted that the record did not (`seed 3: taint of node-9`). A run that did
   * less than the record was slower with a backlog (on 1.20, leftover entries cost it tokens the controller did not
   * spend in that recording); a run that did more is a model the controller contradicts.
   */
  beyond: string[];
  /** What a run of the stand-in had not done by its end that the record did, with the zone of the node. */
  short: { seed: number; what: string; zone: string }[];
  /** Forecasts (from the recorded nodes, every half second) later than the recorded taint or eviction. */
  late: string[];
  /** Taints and evictions no forecast before them named. */
  unforeseen: string[];
  /** Readings judged, and how early the forecast named each taint and eviction at the last reading before it. */
  readings: number;
  earliestMs: { taints: number[]; evictions: number[] };
}

const LOOK_MS = 500;
const seconds = (t: number) => Math.floor(t / 1000) * 1000;

const tolerating = (ms: number | null): SlimToleration[] =>
  ms === 0 ? [] : [{ key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', ...(ms === null ? {} : { seconds: ms / 1000 }) }];

/** The taint on `node` at `t` as the watch had it: its timeAdded and since when it has been on without a break. */
function taintAt(trace: ControllerTrace, node: string, t: number): { added: number; since: number } | undefined {
  let on: { added: number; since: number } | undefined;
  const events = [
    ...trace.observed.taints.filter((x) => x.node === node).map((x) => ({ at: x.seenAt, added: x.timeAdded as number | undefined })),
    ...trace.observed.untainted.filter((x) => x.node === node).map((x) => ({ at: x.seenAt, added: undefined })),
  ].sort((a, b) => a.at - b.at);
  for (const e of events) {
    if (e.at > t) break;
    on = e.added === undefined ? undefined : { added: e.added, since: on?.since ?? e.added };
  }
  return on;
}

/** The nodes as the API had them at `t`, as the forecast reads them. */
function nodesAt(trace: ControllerTrace, t: number, byNode: ReadonlyMap<string, PodGroup[]>): ForecastNode[] {
  const renewMs = trace.settings.leaseDurationMs / 4;
  return trace.nodes.map((n) => {
    const nr = trace.observed.notReady.find((x) => x.node === n.name && x.seenAt <= t);
    const taint = taintAt(trace, n.name, t);
    const leaseRenew =
      n.lastRenew === undefined ? t : t >= n.lastRenew ? n.lastRenew : n.lastRenew - Math.ceil((n.lastRenew - t) / renewMs) * renewMs;
    return {
      name: n.name,
      zone: n.zone,
      ...(n.excluded ? { excluded: true } : {}),
      leaseRenew,
      ready: nr ? { status: 'Unknown', transition: nr.transition } : { status: 'True', transition: trace.start - 3_600_000 },
      taints: taint ? [{ key: UNREACHABLE, effect: 'NoExecute', timeAdded: seconds(taint.added) }] : [],
      ...(taint ? { taintedSince: seconds(taint.since) } : {}),
      pods: byNode.get(n.name) ?? [],
    };
  });
}

/** Replays the trace through the stand-in (`seeds` runs) and through the forecast, against the record. */
export function judgeTrace(trace: ControllerTrace, seeds = 20): TraceJudgement {
  const traits = traitsOf(parseKubeVersion(trace.release));
  const firstTaint = new Map<string, number>();
  for (const x of trace.observed.taints) if (!firstTaint.has(x.node)) firstTaint.set(x.node, x.seenAt);
  const eviction = new Map(trace.observed.evictions.map((e) => [e.pod, Math.min(e.at, e.seenAt)]));
  const retaints = trace.observed.taints.length - firstTaint.size;
  const failures = trace.observed.taintFailures ?? [];
  const retaintsExplained = trace.observed.taints.filter(
    (x) =>
      x.seenAt > firstTaint.get(x.node)! &&
      (failures.some((f) => f.node === x.node && f.at <= x.seenAt) ||
        trace.observed.queued.some((q) => q.node === x.node && q.at > firstTaint.get(x.node)! && q.at <= x.seenAt)),
  ).length;

  const zoneOf = (node: string) => trace.nodes.find((n) => n.name === node)?.zone ?? '';
  const sim: TraceJudgement['sim'] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    const out = simulateController({
      settings: trace.settings,
      requeue: traits.requeuesEveryPass,
      taintsInTheSamePass: traits.taintsInTheSamePass,
      nodes: trace.nodes.map((n) => ({
        name: n.name,
        zone: n.zone,
        ...(n.excluded ? { excluded: true } : {}),
        ...(n.lastRenew !== undefined ? { lastRenew: n.lastRenew } : {}),
      })),
      pods: trace.pods.map((p) => ({ key: p.key, node: p.node, tolerationMs: p.tolerationMs ?? Infinity })),
      seed,
      // the passes at the phase of the first one the log shows (a queue addition a few ms into it)
      ...(trace.observed.queued.length ? { passAt: trace.observed.queued[0]!.at - 5 } : {}),
      // from a lease duration before any recorded renewal: the controller had seen each node's last one
      start: Math.min(trace.start, ...trace.nodes.map((n) => n.lastRenew ?? Infinity)) - trace.settings.leaseDurationMs,
      // on for the longest toleration past the record's end: a pod of a node tainted in a later pass than the
      // controller's (1.20's queue takes its leftovers in an order the record cannot give) is evicted as late, not never
      end: trace.end + Math.max(0, ...trace.pods.map((p) => p.tolerationMs ?? 0).filter(Number.isFinite)),
      lookAt: [],
      look: () => undefined,
    });
    sim.push({
      seed,
      tainted: [...out.tainted.keys()].sort(),
      evicted: [...out.evicted.keys()].sort(),
      retaints: out.taints.length - out.tainted.size,
    });
  }

  const byNode = new Map<string, PodGroup[]>();
  for (const g of groupPods(trace.pods.map((p): ForecastPod => ({ key: p.key, node: p.node, tolerations: tolerating(p.tolerationMs) }))))
    byNode.set(g.node, [...(byNode.get(g.node) ?? []), g]);
  const late: string[] = [];
  const named = new Set<string>();
  const lastBefore = new Map<string, number>();
  let readings = 0;
  const stamp = (t: number) => new Date(t).toISOString().slice(11, 23);
  for (let t = trace.start; t < trace.end; t += LOOK_MS) {
    const f = forecast({
      now: t,
      settings: trace.settings,
      nodes: nodesAt(trace, t, byNode),
      taintsInTheSamePass: traits.taintsInTheSamePass,
      requeuesEveryPass: traits.requeuesEveryPass,
    });
    readings++;
    for (const n of f.nodes) {
      const real = firstTaint.get(n.name);
      if (real === undefined || real <= t || n.tainted || n.taintAt === undefined) continue;
      named.add(`taint of ${n.name}`);
      lastBefore.set(`taint of ${n.name}`, real - n.taintAt);
      if (n.taintAt > real) late.push(`at ${stamp(t)}: taint of ${n.name} forecast ${stamp(n.taintAt)}, came ${stamp(real)}`);
    }
    for (const p of f.pods) {
      const real = eviction.get(p.key);
      if (real === undefined || real <= t || p.evictAt === undefined) continue;
      named.add(`eviction of ${p.key}`);
      lastBefore.set(`eviction of ${p.key}`, real - p.evictAt);
      if (p.evictAt > real) late.push(`at ${stamp(t)}: eviction of ${p.key} forecast ${stamp(p.evictAt)}, came ${stamp(real)}`);
    }
  }
  const expected = [...[...firstTaint.keys()].map((n) => `taint of ${n}`), ...[...eviction.keys()].map((p) => `eviction of ${p}`)];
  return {
    tainted: [...firstTaint.keys()].sort(),
    evicted: [...eviction.keys()].sort(),
    retaints,
    retaintsExplained,
    sim,
    matching: sim.filter(
      (x) => x.tainted.join() === [...firstTaint.keys()].sort().join() && x.evicted.join() === [...eviction.keys()].sort().join(),
    ).length,
    beyond: sim.flatMap((x) => [
      ...x.tainted.filter((n) => !firstTaint.has(n)).map((n) => `seed ${x.seed}: taint of ${n}`),
      ...x.evicted.filter((p) => !eviction.has(p)).map((p) => `seed ${x.seed}: eviction of ${p}`),
    ]),
    short: sim.flatMap((x) => [
      ...[...firstTaint.keys()]
        .filter((n) => !x.tainted.includes(n))
        .map((n) => ({ seed: x.seed, what: `taint of ${n}`, zone: zoneOf(n) })),
      ...[...eviction.keys()]
        .filter((p) => !x.evicted.includes(p))
        .map((p) => ({ seed: x.seed, what: `eviction of ${p}`, zone: zoneOf(trace.pods.find((q) => q.key === p)?.node ?? '') })),
    ]),
    late,
    unforeseen: expected.filter((x) => !named.has(x)),
    readings,
    earliestMs: {
      taints: [...lastBefore].filter(([k]) => k.startsWith('taint')).map(([, v]) => v),
      evictions: [...lastBefore].filter(([k]) => k.startsWith('eviction')).map(([, v]) => v),
    },
  };
}

/** The controller logs a zone as its key, `region:\0:zone`; a node's zone here is `region:zone`. */
const zoneKey = (zone: string) => zone.replace(/[:\0]+/g, ':');

/**
 * Where a replay of a two-zone trace (one zone partially disrupted, one at the normal rate) departs from the record
 * by more than the stand-in's draws allow; empty when it does not:
 * - a run of the stand-in that tainted or evicted what the controller did not;
 * - a run short of a taint or eviction outside a zone the controller's log shows partially disrupted (a zone at the
 *   normal rate has no backlog: every run must keep up with the controller there);
 * - too few runs that did all the controller did: most on releases that re-queue every pass (the runs differ only in
 *   the order and phase of the backlog), at least one on 1.20, whose leftover entries cost a run of the stand-in
 *   tokens the controller may not have spent in that recording (a run that drew more leftovers than the controller
 *   is slower with the backlog, not wrong).
 */
export function twoZoneDepartures(trace: ControllerTrace, j: TraceJudgement): string[] {
  const leftovers = !traitsOf(parseKubeVersion(trace.release)).requeuesEveryPass;
  const partial = new Set(trace.observed.zoneStates.filter((z) => z.state === 'PartialDisruption').map((z) => zoneKey(z.zone)));
  const need = leftovers ? 1 : Math.ceil(j.sim.length * 0.75);
  return [
    ...j.beyond.map((b) => `${b}, which the controller did not`),
    ...j.short.filter((s) => !partial.has(zoneKey(s.zone))).map((s) => `seed ${s.seed}: no ${s.what} in ${s.zone}, which has no backlog`),
    ...(j.matching < need ? [`${j.matching} of ${j.sim.length} runs of the stand-in did all the controller did; ${need} must`] : []),
  ];
}
