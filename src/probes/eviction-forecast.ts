import { GET_VERSION, READ_NODE_LEASES, READ_NODES, READ_PODS } from '../contract/access.js';
import { z } from 'zod';
import { type ResolvedSettings, resolveControllerSettings } from '../kube/controller-settings.js';
import { type ForecastNode, type ForecastPod, defaultSilentAfter, forecast } from '../kube/forecast.js';
import { resolveNodeSelector } from '../kube/node-selection.js';
import { cannotSee, gated, type ObjectChange, reactive, sameLabels, watching } from '../contract/readings.js';
import { type SlimLease, type SlimNode, type SlimPod, watchSpecs, zoneOf } from '../kube/resources.js';
import { controllerTaint, trackTaintedSince } from '../kube/taint-since.js';
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

const LEASE_NS = 'kube-node-lease';

/** Whether the model can predict an eviction on this node (its lease renewed at `renew`): silent, not Ready, or tainted (see forecast.ts). */
function isFailing(n: Pick<ForecastNode, 'ready' | 'created' | 'taints'>, renew: number | undefined, now: number, silentAfter: number): boolean {
  const beat = n.ready?.heartbeat;
  const last = renew === undefined ? (beat ?? n.created) : beat === undefined ? renew : Math.max(renew, beat);
  return n.ready?.status !== 'True' || last === undefined || now - last > silentAfter || controllerTaint(n) !== undefined;
}

/** The names in a reading's detail: the first ten, and how many more. */
function someNames(names: string[]): string {
  return names.length <= 10 ? names.join(', ') : `${names.slice(0, 10).join(', ')} and ${names.length - 10} more`;
}

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
      // Pods by node, kept up to date from the pods watch; for a failing node, also what the forecast reads of its
      // pods, made when a judgement first needs it and again only after its pods changed.
      const podsOn = new Map<string, { pods: Map<string, SlimPod>; forecast?: ForecastPod[] }>();
      const index = (key: string, p: SlimPod | undefined, before: SlimPod | undefined) => {
        if (before?.nodeName) {
          const on = podsOn.get(before.nodeName);
          on?.pods.delete(key);
          if (on) on.forecast = undefined;
        }
        if (p?.nodeName) {
          const on = podsOn.get(p.nodeName) ?? { pods: new Map<string, SlimPod>() };
          on.pods.set(key, p);
          on.forecast = undefined;
          podsOn.set(p.nodeName, on);
        }
      };
      const forecastPodsOn = (node: string): ForecastPod[] => {
        const on = podsOn.get(node);
        if (!on) return [];
        on.forecast ??= [...on.pods]
          .filter(([, p]) => p.deletionTimestamp === undefined && (!namespaces || namespaces.has(p.namespace)))
          .map(([key, p]) => ({ key, node, tolerations: p.tolerations }));
        return on.forecast;
      };
      for (const [key, p] of pods.store) index(key, p, undefined);
      pods.subscribe((c) => {
        if (c.type === 'added' || c.type === 'modified') index(c.key, c.object, c.previous);
        else if (c.type === 'deleted') index(c.key, undefined, c.object);
      });
      // What a judgement reads of the whole fleet is worked out again only when the fleet changes (a node or lease
      // added or gone, labels changed), not on every event: at thousands of nodes that would be most of the cost.
      let fleetChanged = true;
      let selected = new Set<string>();
      let leaseDurationMs: number | undefined;
      let silentAfter = params.silentAfter ?? defaultSilentAfter(resolved.settings);
      // One ForecastNode per Node object (a Node is replaced on every change), its lease and taint times brought up
      // to date at each judgement: no allocation per node and judgement at thousands of nodes.
      const seen = new WeakMap<SlimNode, { f: ForecastNode; leaseKey: string }>();
      const entryOf = (n: SlimNode) => {
        let e = seen.get(n);
        if (!e) {
          const f: ForecastNode = { name: n.name, zone: zoneOf(n.labels), excluded: 'node.kubernetes.io/exclude-disruption' in n.labels, created: n.created, ready: n.ready, taints: n.taints };
          e = { f, leaseKey: `${LEASE_NS}/${n.name}` };
          seen.set(n, e);
        }
        return e;
      };
      // (a Node seen only in an event's `previous` gets no entry: the watch handlers stay allocation-free)
      const renewOf = (n: SlimNode) => leases.store.get(seen.get(n)?.leaseKey ?? `${LEASE_NS}/${n.name}`)?.renewTime;
      const forecastNode = (n: SlimNode): ForecastNode => {
        const { f, leaseKey } = entryOf(n);
        f.leaseRenew = leases.store.get(leaseKey)?.renewTime;
        f.taintedSince = taintedSince(n.name);
        return f;
      };
      const failingNode = (name: string | undefined, renew?: number) => {
        const n = name === undefined ? undefined : nodes.store.get(name);
        return n !== undefined && isFailing(n, renew ?? renewOf(n), ctx.clock.now(), silentAfter);
      };
      // Events that cannot change the forecast do not wake it: a healthy node's heartbeat (its lease renewed, its
      // status posted), and pods coming and going on healthy nodes. Time-driven changes come from recheckAt.
      const mattersForNode = (c: ObjectChange<SlimNode>) =>
        c.previous === undefined || failingNode(c.key) || isFailing(c.previous, renewOf(c.previous), ctx.clock.now(), silentAfter) || !sameLabels(c.previous.labels, c.object.labels);
      const mattersForLease = (c: ObjectChange<SlimLease>) =>
        c.type !== 'modified' || failingNode(c.object.name) || failingNode(c.object.name, c.previous?.renewTime ?? -Infinity) || c.previous?.durationSeconds !== c.object.durationSeconds;
      const mattersForPod = (c: ObjectChange<SlimPod>) => failingNode(c.object.nodeName) || failingNode(c.previous?.nodeName);
      nodes.subscribe((c) => {
        if (c.type === 'synced' || c.type === 'added' || c.type === 'deleted' || (c.type === 'modified' && (c.relist || !c.previous || !sameLabels(c.previous.labels, c.object.labels))))
          fleetChanged = true;
      });
      leases.subscribe((c) => {
        if (c.type === 'synced' || c.type === 'added' || c.type === 'deleted' || (c.type === 'modified' && (c.relist || c.previous?.durationSeconds !== c.object.durationSeconds)))
          fleetChanged = true;
      });
      const woken = [gated(nodes, mattersForNode), gated(leases, mattersForLease), gated(pods, mattersForPod), leader];
      yield* reactive(ctx, {
        watches: woken,
        // thousands of nodes failing at once make nearly every event matter: judge them in batches of a quarter second
        minIntervalMs: 250,
        judge(now) {
          const settings = { ...resolved.settings };
          if (fleetChanged) {
            fleetChanged = false;
            selected = new Set(resolveNodeSelector(params.nodes, ctx.inventory.spec.nodes, [...nodes.store.values()]));
            const seen = [...leases.store.values()].map((l) => l.durationSeconds).filter((d): d is number => d !== undefined).sort((a, b) => a - b);
            leaseDurationMs = seen.length ? seen[Math.floor(seen.length / 2)]! * 1000 : undefined;
          }
          if (resolved.sources.leaseDurationMs === 'defaults' && leaseDurationMs !== undefined) settings.leaseDurationMs = leaseDurationMs;
          silentAfter = params.silentAfter ?? defaultSilentAfter(settings);
          const fnodes: ForecastNode[] = [];
          for (const n of nodes.store.values()) fnodes.push(forecastNode(n));
          // Only pods on failing nodes can be evicted: take them from the per-node index, not from every pod.
          const fpods: ForecastPod[] = [];
          for (const n of fnodes) {
            if (!selected.has(n.name) || !isFailing(n, n.leaseRenew, now, silentAfter)) continue;
            for (const fp of forecastPodsOn(n.name)) fpods.push(fp);
          }
          const lease = [...leader.store.values()][0];
          const leaseEnds = lease?.renewTime !== undefined ? lease.renewTime + (lease.durationSeconds ?? 15) * 1000 : undefined;
          const controllerRunning = lease === undefined ? undefined : leaseEnds !== undefined && leaseEnds > now;
          // the reading lists the first 20 pods to be evicted; the forecast counts them all
          const f = forecast({ now, settings, nodes: fnodes, pods: fpods, silentAfterMs: silentAfter, controllerRunning, taintsInTheSamePass, podsKept: 20 });

          const failing = f.nodes.filter((n) => n.silent || n.notReady || n.tainted);
          const e = f.earliest;
          const violated = e !== undefined && e.at - now <= params.margin;
          let recheckAt = Infinity;
          if (e && e.at - params.margin > now) recheckAt = e.at - params.margin;
          for (const n of f.nodes) if (!n.silent && n.lastHeartbeat !== undefined) recheckAt = Math.min(recheckAt, n.lastHeartbeat + silentAfter + 1);
          if (controllerRunning && leaseEnds !== undefined) recheckAt = Math.min(recheckAt, leaseEnds + 1);
          if (f.keepsTaintsFrom !== undefined) recheckAt = Math.min(recheckAt, f.keepsTaintsFrom);
          const nodesAtRisk = f.nodesAtRisk;
          const failingNames = failing.map((n) => n.name);
          const silentNames = someNames(failingNames);
          const detail = e
            ? `first eviction ${e.at > now ? `in ${formatDuration(e.at - now)}` : 'due now'}: ${e.pod} on ${e.node} (${f.atRisk} pod${f.atRisk === 1 ? '' : 's'} at risk on ${nodesAtRisk} node${nodesAtRisk === 1 ? '' : 's'})`
            : f.frozen
              ? `no eviction: no kube-controller-manager holds ${params.controllerManagerLease}${failing.length ? `; failing: ${silentNames}` : ''}`
              : failing.length
                ? `no eviction predicted; failing: ${silentNames}${f.masterDisruptionAt !== undefined ? ' (all zones down: master disruption mode)' : ''}`
                : `no eviction predicted: ${f.nodes.length} nodes heartbeating`;
          return {
            status: violated ? 'violated' : 'ok',
            detail,
            key: `${violated}|${e?.pod}|${f.atRisk}|${failingNames.join(',')}|${f.frozen}|${f.masterDisruptionAt !== undefined}`,
            recheckAt,
            value: {
              earliestEviction: e ? { ...e, inMs: e.at - now } : null,
              atRisk: f.atRisk,
              frozen: f.frozen,
              masterDisruptionAt: f.masterDisruptionAt ?? null,
              nodes: failing,
              healthyNodes: f.nodes.length - failing.length,
              pods: f.pods.filter((p) => p.evictAt !== undefined),
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
