import { GET_VERSION, READ_NODE_LEASES, READ_NODES, READ_PODS } from '../contract/access.js';
import { z } from 'zod';
import { type ResolvedSettings, resolveControllerSettings } from '../kube/controller-settings.js';
import { ForecastScratch, defaultSilentAfter, forecastColumns, isFailing } from '../forecast/forecast.js';
import { forecastFeed } from '../forecast/feed.js';
import { trackNodeSelection } from '../kube/node-selection.js';
import { cannotSee, gated, type ObjectChange, reactive, sameLabels, watching } from '../contract/readings.js';
import { type SlimLease, type SlimNode, type SlimPod, watchSpecs } from '../kube/resources.js';
import { trackTaintedSince } from '../kube/taint-since.js';
import { formatDuration } from '../core/duration.js';
import { NodeSelector } from '../runbook/selectors.js';
import { duration } from '../core/zod-helpers.js';
import { parseKubeVersion, traitsOf } from '../kube/versions.js';
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
});

/** The names in a reading's detail: the first ten of `count`, and how many more. */
function someNames(names: string[], count: number): string {
  return count <= 10 ? names.join(', ') : `${names.slice(0, 10).join(', ')} and ${count - 10} more`;
}

/** Failing nodes listed in a reading's value (the first by name; a report lists as many): the forecast counts them all. */
const NODES_LISTED = 100;

/** The live eviction forecast: when each failing node goes NotReady and its pods are evicted. */
export default defineProbe({
  meta: {
    access: [READ_NODES, READ_NODE_LEASES, READ_PODS, { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'], namespace: { param: 'controllerManagerLease' }, why: 'watches the leader-election Lease `controllerManagerLease`' }, GET_VERSION],
    id: 'eviction-forecast',
    summary: 'Predicts per node the NotReady time and per pod the earliest eviction; violated when one is within margin.',
    description:
      'A model of the node lifecycle controller and the taint manager, fed by watches of Nodes, node Leases, Pods and ' +
      "the controller-manager's leader lease. A node that stopped renewing its lease goes NotReady at its last heartbeat " +
      '+ the grace period, is tainted NoExecute one monitor period later (rate-limited per zone, not at all in a small ' +
      'partially disrupted zone, and never when every zone is down: master disruption mode), and each of its pods is ' +
      'evicted when its toleration runs out. In master disruption mode the controller removes the taints, except one ' +
      'it added in the very pass it entered that mode; a taint still there after that pass is kept, and its pods are ' +
      "predicted evicted. The prediction is the earliest the real controller can act: never late. " +
      'The controller settings come from the inventory, else /configz, else the static-pod manifest, else the defaults ' +
      "of the server's version. Violated when the earliest eviction is within `margin`; unknown while the apiserver " +
      'cannot be watched.',
    params: Params,
  },
  start(ctx, params) {
    const [ns, name] = params.controllerManagerLease.split('/') as [string, string];
    const specs = { nodes: watchSpecs.nodes(), leases: watchSpecs.nodeLeases(), pods: watchSpecs.pods(), leader: watchSpecs.lease(ns, name) };
    return watching(ctx, specs, async function* ({ nodes, leases, pods, leader }, watches) {
      yield { status: 'unknown', at: ctx.clock.now(), value: null, detail: 'reading the controller settings' };
      let resolved: ResolvedSettings;
      try {
        resolved = await resolveControllerSettings(ctx);
      } catch (e) {
        for (const w of watches) w.release();
        yield* cannotSee(ctx, e);
        return;
      }
      const { taintsInTheSamePass } = traitsOf(parseKubeVersion(resolved.version));
      const namespaces = params.namespaces ? new Set(params.namespaces) : undefined;
      const taintedSince = trackTaintedSince(nodes, ctx.clock);
      const feed = forecastFeed(nodes, leases, pods, { namespaces, taintedSince });
      // the memory every judgement works in, kept from one to the next
      const scratch = new ForecastScratch();
      // What a judgement reads of the whole fleet is worked out again only when the fleet changes (a node or lease
      // added or gone, labels or lease durations changed), not on every event: at thousands of nodes that would be
      // most of the cost.
      let leasesChanged = true;
      const selected = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
      // 'all' selects every Node
      const podsOf = params.nodes === 'all' ? undefined : (name: string) => selected.has(name);
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
        c.type !== 'modified' || failing(c.object.name) || failing(c.object.name, c.previous?.renewTime ?? -Infinity) || c.previous?.durationSeconds !== c.object.durationSeconds;
      const mattersForPod = (c: ObjectChange<SlimPod>) => failing(c.object.nodeName) || failing(c.previous?.nodeName);
      leases.subscribe((c) => {
        if (c.type === 'synced' || c.type === 'added' || c.type === 'deleted' || (c.type === 'modified' && (c.relist || c.previous?.durationSeconds !== c.object.durationSeconds)))
          leasesChanged = true;
      });
      const woken = [gated(nodes, mattersForNode), gated(leases, mattersForLease), gated(pods, mattersForPod), leader];
      yield* reactive(ctx, {
        watches: woken,
        // thousands of nodes failing at once make nearly every event matter: judge them in batches of a quarter second
        minIntervalMs: 250,
        judge(now) {
          const settings = { ...resolved.settings };
          if (leasesChanged) {
            leasesChanged = false;
            const seen = [...leases.store.values()].map((l) => l.durationSeconds).filter((d): d is number => d !== undefined).sort((a, b) => a - b);
            leaseDurationMs = seen.length ? seen[Math.floor(seen.length / 2)]! * 1000 : undefined;
          }
          if (resolved.sources.leaseDurationMs === 'defaults' && leaseDurationMs !== undefined) settings.leaseDurationMs = leaseDurationMs;
          silentAfter = params.silentAfter ?? defaultSilentAfter(settings);
          // Only failing nodes go to the forecast as objects; the rest are counted per zone (all they change is the
          // zones' sizes), and the first moment one of them may go silent is when to judge again. Only pods on failing
          // nodes can be evicted: their groups come from the per-node index, not from every pod.
          const fleet = feed.fleet(now, silentAfter, podsOf);
          const lease = [...leader.store.values()][0];
          const leaseEnds = lease?.renewTime !== undefined ? lease.renewTime + (lease.durationSeconds ?? 15) * 1000 : undefined;
          const controllerRunning = lease === undefined ? undefined : leaseEnds !== undefined && leaseEnds > now;
          // the reading lists the first 20 pods to be evicted and the first 100 failing nodes; the forecast counts them all
          const f = forecastColumns({ now, settings, nodes: fleet.nodes, healthy: fleet.healthy, pods: fleet.pods, silentAfterMs: silentAfter, controllerRunning, taintsInTheSamePass, scratch, podsKept: 20, evictedPodsOnly: true, nodesKept: NODES_LISTED });

          const failingNodes = f.nodes;
          const failingCount = f.nodeCount;
          const e = f.earliest;
          const violated = e !== undefined && e.at - now <= params.margin;
          // when a node may fall silent, be it healthy or failing and still heartbeating
          let recheckAt = fleet.firstSilence;
          if (e && e.at - params.margin > now) recheckAt = Math.min(recheckAt, e.at - params.margin);
          if (controllerRunning && leaseEnds !== undefined) recheckAt = Math.min(recheckAt, leaseEnds + 1);
          if (f.keepsTaintsFrom !== undefined) recheckAt = Math.min(recheckAt, f.keepsTaintsFrom);
          const nodesAtRisk = f.nodesAtRisk;
          const silentNames = someNames(failingNodes.slice(0, 10).map((n) => n.name), failingCount);
          const detail = e
            ? `first eviction ${e.at > now ? `in ${formatDuration(e.at - now)}` : 'due now'}: ${e.pod} on ${e.node} (${f.atRisk} pod${f.atRisk === 1 ? '' : 's'} at risk on ${nodesAtRisk} node${nodesAtRisk === 1 ? '' : 's'})`
            : f.frozen
              ? `no eviction: no kube-controller-manager holds ${params.controllerManagerLease}${failingCount ? `; failing: ${silentNames}` : ''}`
              : failingCount
                ? `no eviction predicted; failing: ${silentNames}${f.masterDisruptionAt !== undefined ? ' (all zones down: master disruption mode)' : ''}`
                : `no eviction predicted: ${nodes.store.size} nodes heartbeating`;
          return {
            status: violated ? 'violated' : 'ok',
            detail,
            key: `${violated}|${e?.pod}|${f.atRisk}|${fleet.failingSet}|${f.frozen}|${f.masterDisruptionAt !== undefined}`,
            recheckAt,
            value: {
              earliestEviction: e ? { ...e, inMs: e.at - now } : null,
              atRisk: f.atRisk,
              frozen: f.frozen,
              masterDisruptionAt: f.masterDisruptionAt ?? null,
              nodes: failingNodes,
              failingNodes: failingCount,
              healthyNodes: nodes.store.size - failingCount,
              pods: f.pods,
              zones: f.zones,
              settings: { ...settings, silentAfterMs: silentAfter },
              sources: resolved.sources,
            },
          };
        },
      });
    });
  },
});
