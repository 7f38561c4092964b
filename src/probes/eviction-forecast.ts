import { GET_VERSION, READ_NODE_LEASES, READ_NODES, READ_PODS, watches, watchesLeaderLeases } from '../contract/access.js';
import { z } from 'zod';
import { type ResolvedSettings, resolveControllerSettings } from '../kube/controller-settings.js';
import { defaultSilentAfter, isFailing } from '../forecast/forecast.js';
import { forecastFeed } from '../forecast/feed.js';
import type { PodForecast } from '../forecast/model.js';
import { deviceTaintEvictions } from '../forecast/device-taints.js';
import { draWatchSpecs } from '../kube/dra.js';
import { trackNodeSelection } from '../kube/node-selection.js';
import {
  cannotSee,
  gated,
  type ObjectChange,
  reactive,
  type ReactiveOptions,
  sameLabels,
  type Watched,
  watching,
} from '../contract/readings.js';
import type { AppliedEffects, Ctx } from '../contract/context.js';
import { type SlimLease, type SlimNode, type SlimPod, watchSpecs } from '../kube/resources.js';
import { trackTaintedSince } from '../kube/taint-since.js';
import { NodeSelector } from '../runbook/selectors.js';
import { duration } from '../core/zod-helpers.js';
import { parseKubeVersion, serverVersion, traitsOf } from '../kube/versions.js';
import { defineProbe } from '../contract/probe.js';
import { type EvictionForecastValue, type ForecastHandles, type Judging, judgeForecast } from './parts/eviction-judgement.js';

export type { EvictionForecastValue } from './parts/eviction-judgement.js';

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

/** The live eviction forecast: when each failing node goes NotReady and its pods are evicted. */
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
    return watching(
      ctx,
      () => forecastSpecs(ctx, params),
      async function* (handles, watches) {
        yield { status: 'unknown', at: ctx.clock.now(), value: null, detail: 'reading the controller settings' };
        let resolved: ResolvedSettings;
        try {
          resolved = await resolveControllerSettings(ctx);
        } catch (e) {
          for (const w of watches) w.release();
          yield* cannotSee(ctx, e);
          return;
        }
        yield* reactive(ctx, forecastJudge(ctx, params, handles as ForecastHandles, resolved));
      },
    );
  },
});

type Params = z.output<typeof Params>;

async function forecastSpecs(ctx: Ctx, params: Params) {
  const [ns, name] = params.controllerManagerLease.split('/') as [string, string];
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
}

/** The feed of the fleet, the watches that wake a judgement, and the judgement. */
function forecastJudge(
  ctx: Ctx,
  params: Params,
  handles: ForecastHandles,
  resolved: ResolvedSettings,
): ReactiveOptions<EvictionForecastValue> {
  const { nodes, leases, pods } = handles;
  const { taintsInTheSamePass, requeuesEveryPass } = traitsOf(parseKubeVersion(resolved.version));
  const namespaces = params.namespaces ? new Set(params.namespaces) : undefined;
  const taintedSince = trackTaintedSince(nodes, ctx.clock);
  const selected = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
  // 'all' selects every Node
  const podsOf = params.nodes === 'all' ? undefined : (name: string) => selected.has(name);
  const j: Judging = {
    ctx,
    params,
    resolved,
    handles,
    feed: forecastFeed(nodes, leases, pods, { namespaces, podsOf, taintedSince }),
    traits: { taintsInTheSamePass, requeuesEveryPass },
    deviceEvictions: deviceEvictionsOf(handles, namespaces, podsOf),
    // What a judgement reads of the whole fleet is worked out again only when the fleet changes (a node or lease
    // added or gone, labels or lease durations changed), not on every event: at thousands of nodes that would be
    // most of the cost.
    leasesChanged: true,
    silentAfter: params.silentAfter ?? defaultSilentAfter(resolved.settings),
  };
  leases.subscribe((c) => {
    if (
      c.type === 'synced' ||
      c.type === 'added' ||
      c.type === 'deleted' ||
      (c.type === 'modified' && (c.relist || c.previous?.durationSeconds !== c.object.durationSeconds))
    )
      j.leasesChanged = true;
  });
  return {
    watches: wakingWatches(j),
    // thousands of nodes failing at once make nearly every event matter: judge them in batches of a quarter second
    minIntervalMs: 250,
    judge: (now) => judgeForecast(j, now),
  };
}

/**
 * The watches a judgement wakes on. Events that cannot change the forecast do not wake it: a healthy node's
 * heartbeat (its lease renewed, its status posted), and pods coming and going on healthy nodes. Time-driven changes
 * come from recheckAt. The run's own remediations that stop evictions wake a judgement as they come and go.
 */
function wakingWatches(j: Judging): Watched[] {
  const { ctx, feed } = j;
  const { nodes, leases, pods, leader, claims, slices, rules } = j.handles;
  const failing = (name: string | undefined, renew?: number) => feed.failing(name, ctx.clock.now(), j.silentAfter, renew);
  const mattersForNode = (c: ObjectChange<SlimNode>) =>
    c.previous === undefined ||
    failing(c.key) ||
    isFailing(c.previous, feed.renewOf(c.key), ctx.clock.now(), j.silentAfter) ||
    !sameLabels(c.previous.labels, c.object.labels);
  const mattersForLease = (c: ObjectChange<SlimLease>) =>
    c.type !== 'modified' ||
    failing(c.object.name) ||
    failing(c.object.name, c.previous?.renewTime ?? -Infinity) ||
    c.previous?.durationSeconds !== c.object.durationSeconds;
  const mattersForPod = (c: ObjectChange<SlimPod>) => failing(c.object.nodeName) || failing(c.previous?.nodeName);
  return [
    gated(nodes, mattersForNode),
    gated(leases, mattersForLease),
    gated(pods, mattersForPod),
    leader,
    ...[claims, slices, rules].filter((w) => w !== undefined),
    ...(ctx.applied ? [appliedWatch(ctx.applied)] : []),
  ];
}

/** The pods the device taint eviction controller deletes, counted as the node taint's are (namespaces, nodes). */
function deviceEvictionsOf(
  { pods, claims, slices, rules }: ForecastHandles,
  namespaces: ReadonlySet<string> | undefined,
  podsOf: ((node: string) => boolean) | undefined,
): (now: number) => PodForecast[] {
  return (now) =>
    claims && slices
      ? deviceTaintEvictions({
          now,
          claims: claims.store.values(),
          slices: slices.store.values(),
          rules: rules?.store.values() ?? [],
          nodeOf: (namespace, podName, uid) => {
            const p = pods.store.get(`${namespace}/${podName}`);
            if (!p?.nodeName || p.uid !== uid || p.deletionTimestamp !== undefined) return undefined;
            if ((namespaces && !namespaces.has(namespace)) || (podsOf && !podsOf(p.nodeName))) return undefined;
            return p.nodeName;
          },
        })
      : [];
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
