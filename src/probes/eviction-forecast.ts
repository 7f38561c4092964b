import { GET_VERSION, READ_NODE_LEASES, READ_NODES, READ_PODS, watches, watchesLeaderLeases } from '../contract/access.js';
import { z } from 'zod';
import { type ResolvedSettings, resolveControllerSettings } from '../kube/controller-settings.js';
import { type ControllerState, type Forecast, defaultSilentAfter, forecast, isFailing } from '../forecast/forecast.js';
import { forecastFeed } from '../forecast/feed.js';
import { deviceTaintEvictions, withDeviceEvictions } from '../forecast/device-taints.js';
import { type SlimDeviceTaintRule, type SlimResourceClaim, type SlimResourceSlice, draWatchSpecs } from '../kube/dra.js';
import type { WatchHandle } from '../kube/watch.js';
import { trackNodeSelection } from '../kube/node-selection.js';
import { cannotSee, gated, type ObjectChange, reactive, sameLabels, type Watched, watching } from '../contract/readings.js';
import type { AppliedEffect, AppliedEffects } from '../contract/context.js';
import { type SlimLease, type SlimNode, type SlimPod, watchSpecs } from '../kube/resources.js';
import { trackTaintedSince } from '../kube/taint-since.js';
import { formatDuration } from '../core/duration.js';
import { NodeSelector } from '../runbook/selectors.js';
import { duration } from '../core/zod-helpers.js';
import { parseKubeVersion, serverVersion, traitsOf } from '../kube/versions.js';
import { defineProbe } from '../contract/probe.js';

const Params = z.strictObject({
  margin: duration().prefault('60s').meta({ description: 'violated when the earliest predicted eviction is this close' }),
  nodes: NodeSelector.default('all').meta({ description: 'only pods on these nodes count (zones are always judged on every node)' }),
  namespaces: z.array(z.string().min(1)).min(1).optional().meta({ description: 'only pods in these namespaces count' }),
  silentAfter: duration()
    .optional()
    .meta({ description: 'a node that has not renewed its lease for this long is taken as silent; twice the renew interval when absent' }),
  controllerManagerLease: z
    .string()
    .regex(/^[a-z0-9.-]+\/[a-z0-9.-]+$/)
    .default('kube-system/kube-controller-manager')
    .meta({ description: 'namespace/name of the leader lease: while nobody holds it, evictions are frozen' }),
  deviceTaints: z
    .boolean()
    .default(true)
    .meta({
      description:
        'also predict the evictions of the device taint eviction controller (1.36+): watches ResourceClaims, ResourceSlices ' +
        'and (1.37+) DeviceTaintRules of resource.k8s.io/v1; false leaves them out (and needs no permission on them), as ' +
        'it must on a server that does not serve resource.k8s.io/v1: the forecast reads unknown while it cannot watch them',
    }),
});

const ON_DEVICE_TAINTS = { onlyIf: { param: 'deviceTaints', equals: 'true' } };

/** The names in a reading's detail: the first ten of `count`, and how many more. */
function someNames(names: string[], count: number): string {
  return count <= 10 ? names.join(', ') : `${names.slice(0, 10).join(', ')} and ${count - 10} more`;
}

/** Failing nodes listed in a reading's value (the first by name; a report lists as many): the forecast counts them all. */
const NODES_LISTED = 100;

/** The live eviction forecast: when each failing node goes NotReady and its pods are evicted. */
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

export default defineProbe({
  meta: {
    access: [
      READ_NODES,
      READ_NODE_LEASES,
      READ_PODS,
      watchesLeaderLeases('controllerManagerLease', 'watches the leader-election Lease `controllerManagerLease`'),
      GET_VERSION,
      watches('resource.k8s.io', 'resourceclaims', 'watches ResourceClaims: the devices allocated to pods', ON_DEVICE_TAINTS),
      watches('resource.k8s.io', 'resourceslices', "watches ResourceSlices: their devices' taints", ON_DEVICE_TAINTS),
      watches('resource.k8s.io', 'devicetaintrules', 'watches DeviceTaintRules: taints put on devices', ON_DEVICE_TAINTS),
    ],
    id: 'eviction-forecast',
    summary: 'Predicts per node the NotReady time and per pod the earliest eviction; violated when one is within margin.',
    description:
      'A model of the node lifecycle controller and the taint manager, fed by watches of Nodes, node Leases, Pods and ' +
      "the controller-manager's leader lease. A node that stopped renewing its lease goes NotReady at its last heartbeat " +
      "+ the grace period (counted from a new leader's start when the leader changed since), is queued for the NoExecute " +
      'taint, and each of its pods is evicted when its toleration runs out. Taints are rate-limited per zone (not at all ' +
      'in a small partially disrupted zone), and never given once every zone is down (master disruption mode), when the ' +
      'controller removes the taints but one added in the very pass that entered that mode. The controller re-queues ' +
      "its NotReady nodes every pass in no set order (1.21+), so any queued node may get a zone's next token: each " +
      'node is given the earliest moment it can be tainted (the bound the guard reads, never later than the controller) ' +
      'and the likely one (its share of the tokens it competes for; first in, first out on 1.20). While this run holds ' +
      '`disable-taint-eviction` or `stop-controller-manager` applied, or no controller-manager holds its lease, it ' +
      'predicts no eviction, says why, and gives the first eviction that would follow were the controller restored now. ' +
      'The controller settings come from the inventory, else /configz, else the static-pod manifest, else the defaults ' +
      "of the server's version. A second path is predicted beside it (1.36+, `deviceTaints`): the device taint eviction " +
      'controller deletes the pods of an allocated ResourceClaim whose device has a NoExecute taint, in its ResourceSlice or ' +
      "from a DeviceTaintRule, at the taint's timeAdded + the smallest tolerationSeconds of the claim's matching " +
      'tolerations (at once without one); the reading names the taint and the device. Only a stopped ' +
      'controller-manager (`stop-controller-manager`, or no leader) freezes that prediction: `disable-taint-eviction` turns ' +
      'that controller off too on 1.36+, but it may leave one that already ran without taint eviction as it was, so ' +
      'the forecast keeps predicting device evictions while it is applied (early, never late). Violated when the earliest eviction is within `margin`; unknown while the apiserver ' +
      'cannot be watched.',
    params: Params,
    report: (v: EvictionForecastValue) => ({
      earliestEviction: v.earliestEviction
        ? { at: new Date(v.earliestEviction.at).toISOString(), pod: v.earliestEviction.pod, node: v.earliestEviction.node }
        : null,
      atRisk: v.atRisk,
      frozen: v.frozen,
    }),
    nodeFacts: {
      kinds: ['eviction'],
      of: ({ earliestEviction: e }: EvictionForecastValue) => (e ? [{ kind: 'eviction', node: e.node, pod: e.pod, at: e.at }] : []),
    },
  },
  start(ctx, params) {
    const [ns, name] = params.controllerManagerLease.split('/') as [string, string];
    const specs = async () => {
      // the device taint eviction controller runs by default since 1.36; DeviceTaintRules are served in v1 since 1.37
      const traits = params.deviceTaints ? traitsOf(await serverVersion(ctx.kube)) : undefined;
      return {
        nodes: watchSpecs.nodes(),
        leases: watchSpecs.nodeLeases(),
        pods: watchSpecs.pods(),
        leader: watchSpecs.lease(ns, name),
        ...(traits?.evictsForDeviceTaints ? { claims: draWatchSpecs.resourceClaims(), slices: draWatchSpecs.resourceSlices() } : {}),
        ...(traits?.servesDeviceTaintRules ? { rules: draWatchSpecs.deviceTaintRules() } : {}),
      };
    };
    return watching(ctx, specs, async function* (handles, watches) {
      const { nodes, leases, pods, leader } = handles;
      const dra = handles as Partial<DraHandles>;
      yield { status: 'unknown', at: ctx.clock.now(), value: null, detail: 'reading the controller settings' };
      let resolved: ResolvedSettings;
      try {
        resolved = await resolveControllerSettings(ctx);
      } catch (e) {
        for (const w of watches) w.release();
        yield* cannotSee(ctx, e);
        return;
      }
      const { taintsInTheSamePass, requeuesEveryPass } = traitsOf(parseKubeVersion(resolved.version));
      const namespaces = params.namespaces ? new Set(params.namespaces) : undefined;
      const taintedSince = trackTaintedSince(nodes, ctx.clock);
      // What a judgement reads of the whole fleet is worked out again only when the fleet changes (a node or lease
      // added or gone, labels or lease durations changed), not on every event: at thousands of nodes that would be
      // most of the cost.
      let leasesChanged = true;
      const selected = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
      // 'all' selects every Node
      const podsOf = params.nodes === 'all' ? undefined : (name: string) => selected.has(name);
      const feed = forecastFeed(nodes, leases, pods, { namespaces, podsOf, taintedSince });
      let leaseDurationMs: number | undefined;
      let silentAfter = params.silentAfter ?? defaultSilentAfter(resolved.settings);
      const failing = (name: string | undefined, renew?: number) => feed.failing(name, ctx.clock.now(), silentAfter, renew);
      // Events that cannot change the forecast do not wake it: a healthy node's heartbeat (its lease renewed, its
      // status posted), and pods coming and going on healthy nodes. Time-driven changes come from recheckAt.
      const mattersForNode = (c: ObjectChange<SlimNode>) =>
        c.previous === undefined ||
        failing(c.key) ||
        isFailing(c.previous, feed.renewOf(c.key), ctx.clock.now(), silentAfter) ||
        !sameLabels(c.previous.labels, c.object.labels);
      const mattersForLease = (c: ObjectChange<SlimLease>) =>
        c.type !== 'modified' ||
        failing(c.object.name) ||
        failing(c.object.name, c.previous?.renewTime ?? -Infinity) ||
        c.previous?.durationSeconds !== c.object.durationSeconds;
      const mattersForPod = (c: ObjectChange<SlimPod>) => failing(c.object.nodeName) || failing(c.previous?.nodeName);
      leases.subscribe((c) => {
        if (
          c.type === 'synced' ||
          c.type === 'added' ||
          c.type === 'deleted' ||
          (c.type === 'modified' && (c.relist || c.previous?.durationSeconds !== c.object.durationSeconds))
        )
          leasesChanged = true;
      });
      // the run's own remediations that stop evictions wake a judgement as they come and go
      const applied = ctx.applied;
      const woken = [
        gated(nodes, mattersForNode),
        gated(leases, mattersForLease),
        gated(pods, mattersForPod),
        leader,
        ...[dra.claims, dra.slices, dra.rules].filter((w) => w !== undefined),
        ...(applied ? [appliedWatch(applied)] : []),
      ];
      // the pods the device taint eviction controller deletes, counted as the node taint's are (namespaces, nodes)
      const deviceEvictions = (now: number) =>
        dra.claims && dra.slices
          ? deviceTaintEvictions({
              now,
              claims: dra.claims.store.values(),
              slices: dra.slices.store.values(),
              rules: dra.rules?.store.values() ?? [],
              nodeOf: (namespace, podName, uid) => {
                const p = pods.store.get(`${namespace}/${podName}`);
                if (!p?.nodeName || p.uid !== uid || p.deletionTimestamp !== undefined) return undefined;
                if ((namespaces && !namespaces.has(namespace)) || (podsOf && !podsOf(p.nodeName))) return undefined;
                return p.nodeName;
              },
            })
          : [];
      yield* reactive(ctx, {
        watches: woken,
        // thousands of nodes failing at once make nearly every event matter: judge them in batches of a quarter second
        minIntervalMs: 250,
        judge(now) {
          const settings = { ...resolved.settings };
          if (leasesChanged) {
            leasesChanged = false;
            const seen = [...leases.store.values()]
              .map((l) => l.durationSeconds)
              .filter((d): d is number => d !== undefined)
              .sort((a, b) => a - b);
            leaseDurationMs = seen.length ? seen[Math.floor(seen.length / 2)]! * 1000 : undefined;
          }
          if (resolved.sources.leaseDurationMs === 'defaults' && leaseDurationMs !== undefined) settings.leaseDurationMs = leaseDurationMs;
          silentAfter = params.silentAfter ?? defaultSilentAfter(settings);
          // Only failing nodes go to the forecast; the rest are counted per zone (all they change is the zones' sizes),
          // and the first moment one of them may go silent is when to judge again. Only pods on failing nodes can be
          // evicted: their groups come from the per-node index, not from every pod.
          const fleet = feed.fleet(now, silentAfter);
          const lease = [...leader.store.values()][0];
          const leaseEnds = lease?.renewTime !== undefined ? lease.renewTime + (lease.durationSeconds ?? 15) * 1000 : undefined;
          const leading =
            lease === undefined
              ? undefined
              : leaseEnds !== undefined && leaseEnds > now && lease.holder !== undefined && lease.holder !== '';
          const controller = controllerState(leading, lease?.acquireTime, applied?.current() ?? [], params.controllerManagerLease);
          const judged = {
            now,
            settings,
            nodes: fleet.nodes,
            healthy: fleet.healthy,
            silentAfterMs: silentAfter,
            taintsInTheSamePass,
            requeuesEveryPass,
          };
          // the reading lists the first 20 pods to be evicted and the first 100 failing nodes; the forecast counts them all
          const devices = deviceEvictions(now);
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
          return {
            status: violated ? 'violated' : 'ok',
            detail: describe(f, now, nodes.store.size, ifRestored),
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
              healthyNodes: nodes.store.size - f.nodeCount,
              pods: f.pods,
              zones: f.zones,
              settings: { ...settings, silentAfterMs: silentAfter },
              sources: resolved.sources,
            } satisfies EvictionForecastValue,
          };
        },
      });
    });
  },
});

type DraHandles = {
  claims: WatchHandle<SlimResourceClaim>;
  slices: WatchHandle<SlimResourceSlice>;
  rules: WatchHandle<SlimDeviceTaintRule>;
};

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

/** The applied effects as a watch a judgement wakes on. */
function appliedWatch(applied: AppliedEffects): Watched {
  return {
    key: 'applied',
    freshness: () => ({ fresh: true, synced: true, state: 'watching', reason: "the run's applied actions" }),
    release: () => {},
    subscribe: (fn) => applied.subscribe(fn),
  };
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
