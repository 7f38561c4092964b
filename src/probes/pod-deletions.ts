import { GET_VERSION, READ_NODES, READ_PODS } from '../contract/access.js';
import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { parseLabelSelector } from '../kube/labels.js';
import { trackNodeSelection } from '../kube/node-selection.js';
import { reactive, watching } from '../contract/readings.js';
import { type SlimNode, type SlimPod, watchSpecs } from '../kube/resources.js';
import { trackTaintedSince } from '../kube/taint-since.js';
import { type Deletion, deletionCause } from '../kube/deletions.js';
import { serverVersion, traitsOf } from '../kube/versions.js';
import { NodeSelector } from '../runbook/selectors.js';
import type { WatchHandle } from '../kube/watch.js';
import { defineProbe } from '../contract/probe.js';

const Params = z.strictObject({
  namespaces: z.array(z.string().min(1)).min(1).optional().meta({ description: 'only pods in these namespaces (all when absent)' }),
  excludeNamespaces: z.array(z.string().min(1)).default([]).meta({ description: 'never count pods in these namespaces' }),
  labelSelector: z.string().min(1).optional().meta({ description: 'only pods matching this label selector' }),
  nodes: NodeSelector.optional().meta({ description: 'only pods bound to these nodes (any node when absent)' }),
  max: z.number().int().min(0).default(0).meta({ description: 'violated when more deletions than this were seen' }),
});

function podFilter(ctx: Ctx, params: z.output<typeof Params>, nodes: WatchHandle<SlimNode>) {
  const matches = params.labelSelector ? parseLabelSelector(params.labelSelector) : undefined;
  const ns = params.namespaces ? new Set(params.namespaces) : undefined;
  const excluded = new Set(params.excludeNamespaces);
  const selection = params.nodes && trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
  return (p: SlimPod): boolean => {
    if (!p.nodeName || excluded.has(p.namespace) || (ns && !ns.has(p.namespace)) || (matches && !matches(p.labels))) return false;
    return !selection || selection.has(p.nodeName);
  };
}

/** What a pod-deletions reading says. */
export interface PodDeletionsValue {
  /** How many were seen since the probe started. */
  count: number;
  /** The latest 50 of them. */
  deletions: Deletion[];
}

/** Pods bound to nodes that are deleted (get a deletionTimestamp) or vanish while the probe watches. */
export default defineProbe({
  meta: {
    access: [READ_NODES, READ_PODS, GET_VERSION],
    id: 'pod-deletions',
    summary: 'Pods bound to nodes that get a deletionTimestamp or vanish, with the cause when it can be told.',
    description:
      'Watches Pods from the moment the probe starts and records each pod bound to a node that gets a deletionTimestamp ' +
      '(it is terminating: its containers will be killed when its node syncs) or disappears without one. The cause is ' +
      'given when it can be told: `taint-eviction` (the taint manager: by its DisruptionTarget condition on servers that ' +
      "write it, 1.26 and newer; on older ones by the timing of the node's NoExecute taint and the pod's toleration), " +
      '`device-taint-eviction` (the device taint eviction controller, 1.36+: a NoExecute taint on a device of one of its ' +
      'allocated ResourceClaims; DisruptionTarget reason `DeletionByDeviceTaintManager`), `api-eviction`, `kubelet-eviction`, `preemption`, ' +
      '`garbage-collection`, else `delete`. Namespace, label and node filters narrow what counts; violated when more ' +
      'than `max` were seen. Unknown while the apiserver cannot be watched (a pod that vanished meanwhile is counted ' +
      'when the watch relists).',
    params: Params,
    nodeFacts: {
      kinds: ['deleted'],
      of: (v: PodDeletionsValue) =>
        v.deletions.filter((d) => d.node).map((d) => ({ kind: 'deleted', node: d.node, pod: d.pod, at: d.at, cause: d.cause })),
    },
  },
  start(ctx, params) {
    return watching(ctx, { pods: watchSpecs.pods(), nodes: watchSpecs.nodes() }, ({ pods, nodes }, watches) => {
      const counts = podFilter(ctx, params, nodes);
      const taintedSince = trackTaintedSince(nodes, ctx.clock);
      const deletions: Deletion[] = [];
      // counted as they come: a judgement does not go over every deletion of a long run
      const byCause = new Map<string, number>();
      const seen = new Set<string>();
      // which server writes DisruptionTarget decides how causes are told; until /version answers, they are inferred
      let writesDisruptionTarget = false;
      void serverVersion(ctx.kube).then((v) => (writesDisruptionTarget = traitsOf(v).writesDisruptionTarget));
      let synced = pods.freshness().synced;
      const record = (p: SlimPod, how: Deletion['how']) => {
        if (seen.has(p.uid) || !counts(p)) return;
        seen.add(p.uid);
        const now = ctx.clock.now();
        const deletedAt = p.deletionTimestamp !== undefined ? p.deletionTimestamp - (p.deletionGraceSeconds ?? 0) * 1000 : now;
        const node = p.nodeName ?? '';
        const cause =
          how === 'vanished' && !p.disruption
            ? 'unknown'
            : deletionCause(p, nodes.store.get(node), deletedAt, taintedSince(node), writesDisruptionTarget);
        deletions.push({ pod: `${p.namespace}/${p.name}`, node: p.nodeName ?? '', at: now, how, cause });
        byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
      };
      pods.subscribe((c) => {
        if (c.type === 'synced') {
          synced = true;
          return;
        }
        if (!synced || c.type === 'freshness') return;
        if (c.type === 'deleted') record(c.object, c.object.deletionTimestamp !== undefined ? 'terminating' : 'vanished');
        else if (c.object.deletionTimestamp !== undefined && c.previous?.deletionTimestamp === undefined) record(c.object, 'terminating');
      });
      return reactive(ctx, {
        watches,
        judge() {
          const n = deletions.length;
          const causes = [...byCause].map(([c, k]) => `${k} ${c}`).join(', ');
          const latest = deletions
            .slice(-3)
            .map((d) => `${d.pod} on ${d.node}`)
            .join(', ');
          return {
            status: n > params.max ? 'violated' : 'ok',
            value: { count: n, deletions: deletions.slice(-50) } satisfies PodDeletionsValue,
            detail: n ? `${n} pod${n === 1 ? '' : 's'} deleted (${causes}): ${latest}${n > 3 ? ', …' : ''}` : 'no pod deleted',
            key: `${n}`,
          };
        },
      });
    });
  },
});
