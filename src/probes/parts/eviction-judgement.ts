import type { AppliedEffect, Ctx } from '../../contract/context.js';
import type { Judgement } from '../../contract/readings.js';
import { formatDuration } from '../../core/duration.js';
import type { ForecastFeed } from '../../forecast/feed.js';
import { type ControllerState, type Forecast, defaultSilentAfter, forecast } from '../../forecast/forecast.js';
import { withDeviceEvictions } from '../../forecast/device-taints.js';
import type { PodForecast } from '../../forecast/model.js';
import type { ResolvedSettings } from '../../kube/controller-settings.js';
import type { SlimDeviceTaintRule, SlimResourceClaim, SlimResourceSlice } from '../../kube/dra.js';
import type { SlimLease, SlimNode, SlimPod } from '../../kube/resources.js';
import type { WatchHandle } from '../../kube/watch.js';

/**
 * The eviction forecast probe's judgement: the controller settings and leader as they are now, the forecast of the
 * failing nodes (and, while the controller is stopped, the one that would follow its return), and the reading.
 */
/** The names in a reading's detail: the first ten of `count`, and how many more. */
function someNames(names: string[], count: number): string {
  return count <= 10 ? names.join(', ') : `${names.slice(0, 10).join(', ')} and ${count - 10} more`;
}

/** Failing nodes listed in a reading's value (the first by name; a report lists as many): the forecast counts them all. */
const NODES_LISTED = 100;

/** What an eviction-forecast reading says (times in ms on the run's clock). */
export interface EvictionForecastValue {
  earliestEviction: (Forecast['earliest'] & { inMs: number }) | null;
  atRisk: number;
  /** Why no eviction can come while the controller stays as it is; null when it runs. */
  frozen: string | null;
  /** The first eviction were the controller restored now, while frozen. */
  ifRestoredNow: (Forecast['earliest'] & { inMs: number }) | null;
  masterDisruptionAt: number | null;
  nodes: Forecast['nodes'];
  failingNodes: number;
  healthyNodes: number;
  pods: Forecast['pods'];
  zones: Forecast['zones'];
  settings: ResolvedSettings['settings'] & { silentAfterMs: number };
  sources: ResolvedSettings['sources'];
}

export type DraHandles = {
  claims: WatchHandle<SlimResourceClaim>;
  slices: WatchHandle<SlimResourceSlice>;
  rules: WatchHandle<SlimDeviceTaintRule>;
};

/** The watches the forecast reads; the device taints' only where the server's version has them. */
export type ForecastHandles = {
  nodes: WatchHandle<SlimNode>;
  leases: WatchHandle<SlimLease>;
  pods: WatchHandle<SlimPod>;
  leader: WatchHandle<SlimLease>;
} & Partial<DraHandles>;

/** What the judgements share, and what one leaves to the next. */
export interface Judging {
  ctx: Ctx;
  params: { margin: number; silentAfter?: number; controllerManagerLease: string };
  resolved: ResolvedSettings;
  handles: ForecastHandles;
  feed: ForecastFeed;
  traits: { taintsInTheSamePass: boolean; requeuesEveryPass: boolean };
  deviceEvictions: (now: number) => PodForecast[];
  /** A node lease was added or has gone, or a lease duration changed, since the last judgement. */
  leasesChanged: boolean;
  /** The fleet's lease duration (the median of its leases'). */
  leaseDurationMs?: number;
  silentAfter: number;
}

/** The controller settings, with the fleet's own lease duration when only the defaults gave one; silentAfter follows. */
function currentSettings(j: Judging): ResolvedSettings['settings'] {
  const settings = { ...j.resolved.settings };
  if (j.leasesChanged) {
    j.leasesChanged = false;
    const seen = [...j.handles.leases.store.values()]
      .map((l) => l.durationSeconds)
      .filter((d): d is number => d !== undefined)
      .sort((a, b) => a - b);
    j.leaseDurationMs = seen.length ? seen[Math.floor(seen.length / 2)]! * 1000 : undefined;
  }
  if (j.resolved.sources.leaseDurationMs === 'defaults' && j.leaseDurationMs !== undefined) settings.leaseDurationMs = j.leaseDurationMs;
  j.silentAfter = j.params.silentAfter ?? defaultSilentAfter(settings);
  return settings;
}

/** Whether a controller-manager leads now (undefined: no leader lease), since when, and when its lease runs out. */
function leaderOf(
  leader: WatchHandle<SlimLease>,
  now: number,
): { leading: boolean | undefined; acquired: number | undefined; leaseEnds: number | undefined } {
  const lease = [...leader.store.values()][0];
  const leaseEnds = lease?.renewTime !== undefined ? lease.renewTime + (lease.durationSeconds ?? 15) * 1000 : undefined;
  const leading =
    lease === undefined ? undefined : leaseEnds !== undefined && leaseEnds > now && lease.holder !== undefined && lease.holder !== '';
  return { leading, acquired: lease?.acquireTime, leaseEnds };
}

/** One judgement of the forecast at `now`: its reading, and when to judge again. */
export function judgeForecast(j: Judging, now: number): Judgement<EvictionForecastValue> {
  const { params, feed } = j;
  const settings = currentSettings(j);
  // Only failing nodes go to the forecast; the rest are counted per zone (all they change is the zones' sizes),
  // and the first moment one of them may go silent is when to judge again. Only pods on failing nodes can be
  // evicted: their groups come from the per-node index, not from every pod.
  const fleet = feed.fleet(now, j.silentAfter);
  const { leading, acquired, leaseEnds } = leaderOf(j.handles.leader, now);
  const controller = controllerState(leading, acquired, j.ctx.applied?.current() ?? [], params.controllerManagerLease);
  const judged = { now, settings, nodes: fleet.nodes, healthy: fleet.healthy, silentAfterMs: j.silentAfter, ...j.traits };
  // the reading lists the first 20 pods to be evicted and the first 100 failing nodes; the forecast counts them all
  const devices = j.deviceEvictions(now);
  const f = withDeviceEvictions(
    forecast({ ...judged, controller, podsKept: 20, evictedPodsOnly: true, nodesKept: NODES_LISTED }, feed.store),
    devices,
    controller.running === false,
  );
  // frozen: what would happen the moment the controller runs again as it did (a new leader, now)
  const ifRestored =
    f.frozen !== undefined
      ? withDeviceEvictions(
          forecast({ ...judged, controller: { running: true, since: now }, podsKept: 0, nodesKept: 0 }, feed.store),
          devices,
          false,
        ).earliest
      : undefined;
  const e = f.earliest;
  const violated = e !== undefined && e.at - now <= params.margin;
  // when a node may fall silent, be it healthy or failing and still heartbeating
  let recheckAt = fleet.firstSilence;
  if (e && e.at - params.margin > now) recheckAt = Math.min(recheckAt, e.at - params.margin);
  if (leading && leaseEnds !== undefined) recheckAt = Math.min(recheckAt, leaseEnds + 1);
  if (f.keepsTaintsFrom !== undefined) recheckAt = Math.min(recheckAt, f.keepsTaintsFrom);
  const nodeCount = j.handles.nodes.store.size;
  return {
    status: violated ? 'violated' : 'ok',
    detail: describe(f, now, nodeCount, ifRestored),
    key: `${violated}|${e?.pod}|${e?.likely !== undefined}|${f.atRisk}|${fleet.failingSet}|${f.frozen}|${f.masterDisruptionAt !== undefined}|${ifRestored?.pod}`,
    recheckAt,
    value: {
      earliestEviction: e ? { ...e, inMs: e.at - now } : null,
      atRisk: f.atRisk,
      frozen: f.frozen ?? null,
      ifRestoredNow: ifRestored ? { ...ifRestored, inMs: ifRestored.at - now } : null,
      masterDisruptionAt: f.masterDisruptionAt ?? null,
      nodes: f.nodes,
      failingNodes: f.nodeCount,
      healthyNodes: nodeCount - f.nodeCount,
      pods: f.pods,
      zones: f.zones,
      settings: { ...settings, silentAfterMs: j.silentAfter },
      sources: j.resolved.sources,
    } satisfies EvictionForecastValue,
  };
}

/** The controller as the forecast reads it: its leader lease, and what this run holds applied that stops evictions. */
function controllerState(
  leading: boolean | undefined,
  acquired: number | undefined,
  applied: readonly AppliedEffect[],
  leaseName: string,
): ControllerState {
  const by = (stops: AppliedEffect['stops']) =>
    applied.filter((a) => a.stops === stops).map((a) => `${a.action}${a.node ? ` on ${a.node}` : ''}`);
  const stopped = by('controller-manager');
  const off = by('taint-eviction');
  const c: ControllerState = { running: stopped.length > 0 ? false : leading, since: acquired };
  if (stopped.length > 0) c.stoppedBecause = `kube-controller-manager stopped by this run (${stopped.join(', ')})`;
  else if (leading === false) c.stoppedBecause = `no kube-controller-manager holds ${leaseName}`;
  if (off.length > 0) c.evictionsOff = `taint eviction disabled by this run (${off.join(', ')})`;
  return c;
}

/** A reading's detail: the first eviction, or why none is coming, and what would follow the controller's return. */
function describe(f: Forecast, now: number, nodeCount: number, ifRestored: Forecast['earliest']): string {
  const e = f.earliest;
  const failing = someNames(
    f.nodes.slice(0, 10).map((n) => n.name),
    f.nodeCount,
  );
  const when = (at: number) => (at > now ? `in ${formatDuration(at - now)}` : 'due now');
  if (e) {
    const likely = e.likely === undefined ? ', likely spared' : e.likely > e.at + 500 ? `, likely ${when(e.likely)}` : '';
    const master = f.masterDisruptionAt !== undefined ? '; all zones down: master disruption mode' : '';
    const cause = e.cause !== undefined ? `, ${e.cause}` : '';
    return `first eviction ${when(e.at)}${likely}: ${e.pod} on ${e.node}${cause} (${f.atRisk} pod${f.atRisk === 1 ? '' : 's'} at risk on ${f.nodesAtRisk} node${f.nodesAtRisk === 1 ? '' : 's'})${master}`;
  }
  if (f.frozen !== undefined)
    return `no eviction: ${f.frozen}${ifRestored ? `; if restored now, first eviction ${when(ifRestored.at)}: ${ifRestored.pod} on ${ifRestored.node}` : '; none if restored now'}${f.nodeCount ? `; failing: ${failing}` : ''}`;
  if (f.nodeCount)
    return `no eviction predicted; failing: ${failing}${f.masterDisruptionAt !== undefined ? ' (all zones down: master disruption mode)' : ''}`;
  return `no eviction predicted: ${nodeCount} nodes heartbeating`;
}
