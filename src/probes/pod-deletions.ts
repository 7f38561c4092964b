import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { parseLabelSelector } from '../kube/labels.js';
import { resolveNodeSelector } from '../kube/node-selector.js';
import { cannotSee, hubOf, reactive } from '../contract/readings.js';
import { type SlimNode, type SlimPod, watchSpecs } from '../kube/resources.js';
import { trackTaintedSince } from '../kube/taint-since.js';
import { tolerationMs } from '../kube/tolerations.js';
import type { WatchHandle } from '../kube/watch.js';
import { NodeSelector } from '../runbook/selectors.js';
import { defineProbe } from '../contract/probe.js';

const Params = z.strictObject({
  namespaces: z.array(z.string().min(1)).min(1).optional().meta({ description: 'only pods in these namespaces (all when absent)' }),
  excludeNamespaces: z.array(z.string().min(1)).default([]).meta({ description: 'never count pods in these namespaces' }),
  labelSelector: z.string().min(1).optional().meta({ description: 'only pods matching this label selector' }),
  nodes: NodeSelector.optional().meta({ description: 'only pods bound to these nodes (any node when absent)' }),
  max: z.number().int().min(0).default(0).meta({ description: 'violated when more deletions than this were seen' }),
});

export type DeletionCause = 'taint-eviction' | 'api-eviction' | 'kubelet-eviction' | 'preemption' | 'garbage-collection' | 'delete' | 'unknown';

export interface Deletion {
  pod: string;
  node: string;
  /** Clock time it was seen. */
  at: number;
  /** deletionTimestamp set (terminating), or gone without one. */
  how: 'terminating' | 'vanished';
  cause: DeletionCause;
}

const BY_CONDITION: Record<string, DeletionCause> = {
  DeletionByTaintManager: 'taint-eviction',
  EvictionByEvictionAPI: 'api-eviction',
  PreemptionByScheduler: 'preemption',
  PreemptionByKubeScheduler: 'preemption',
  DeletionByPodGC: 'garbage-collection',
  TerminationByKubelet: 'kubelet-eviction',
};

/**
 * Why a pod was deleted, when it can be told: the DisruptionTarget condition (Kubernetes ≥ 1.26), the kubelet's
 * `Evicted` reason, or the taint manager's timing (its node carries a NoExecute taint and the deletion came when
 * the pod's toleration of it ran out). Otherwise a plain delete (by a user or a controller).
 */
export function deletionCause(pod: SlimPod, node: SlimNode | undefined, deletedAt: number, taintedSince?: number): DeletionCause {
  if (pod.disruption) return BY_CONDITION[pod.disruption] ?? 'unknown';
  if (pod.reason === 'Evicted') return 'kubelet-eviction';
  const noExecute = (node?.taints ?? []).filter((t) => t.effect === 'NoExecute');
  if (noExecute.length) {
    const tol = tolerationMs(pod.tolerations, noExecute);
    if (tol === 0) return 'taint-eviction';
    // the controller refreshes its taint's timeAdded while the node stays down: the first sighting counts
    const added = taintedSince ?? Math.max(...noExecute.map((t) => t.timeAdded ?? -Infinity));
    // never before the toleration runs out; later when the taint manager started after the taint (a restarted
    // controller-manager starts its timers afresh), so only "not too early" can be told
    if (Number.isFinite(tol) && Number.isFinite(added) && deletedAt >= added + tol - 5_000) return 'taint-eviction';
  }
  return 'delete';
}

function podFilter(ctx: Ctx, params: z.output<typeof Params>, nodes: WatchHandle<SlimNode>) {
  const matches = params.labelSelector ? parseLabelSelector(params.labelSelector) : undefined;
  const ns = params.namespaces ? new Set(params.namespaces) : undefined;
  const excluded = new Set(params.excludeNamespaces);
  return (p: SlimPod): boolean => {
    if (!p.nodeName || excluded.has(p.namespace) || (ns && !ns.has(p.namespace)) || (matches && !matches(p.labels))) return false;
    if (!params.nodes) return true;
    return resolveNodeSelector(params.nodes, ctx.inventory.spec.nodes, [...nodes.store.values()]).includes(p.nodeName);
  };
}

/** Pods bound to nodes that are deleted (get a deletionTimestamp) or vanish while the probe watches. */
export default defineProbe({
  meta: {
    id: 'pod-deletions',
    summary: 'Pods bound to nodes that get a deletionTimestamp or vanish, with the cause when it can be told.',
    description:
      'Watches Pods from the moment the probe starts and records each pod bound to a node that gets a deletionTimestamp ' +
      '(it is terminating: its containers will be killed when its node syncs) or disappears without one. The cause is ' +
      'given when it can be told: `taint-eviction` (the taint manager, by the DisruptionTarget condition or by the timing ' +
      "of the node's NoExecute taint and the pod's toleration), `api-eviction`, `kubelet-eviction`, `preemption`, " +
      '`garbage-collection`, else `delete`. Namespace, label and node filters narrow what counts; violated when more ' +
      'than `max` were seen. Unknown while the apiserver cannot be watched (a pod that vanished meanwhile is counted ' +
      'when the watch relists).',
    params: Params,
  },
  start(ctx, params) {
    let pods: WatchHandle<SlimPod>;
    let nodes: WatchHandle<SlimNode>;
    try {
      const hub = hubOf(ctx);
      pods = hub.watch(watchSpecs.pods());
      nodes = hub.watch(watchSpecs.nodes());
    } catch (e) {
      return cannotSee(ctx, e);
    }
    const counts = podFilter(ctx, params, nodes);
    const taintedSince = trackTaintedSince(nodes, ctx.clock);
    const deletions: Deletion[] = [];
    const seen = new Set<string>();
    let synced = pods.freshness().synced;
    const record = (p: SlimPod, how: Deletion['how']) => {
      if (seen.has(p.uid) || !counts(p)) return;
      seen.add(p.uid);
      const now = ctx.clock.now();
      const deletedAt = p.deletionTimestamp !== undefined ? p.deletionTimestamp - (p.deletionGraceSeconds ?? 0) * 1000 : now;
      const node = p.nodeName ?? '';
      const cause = how === 'vanished' && !p.disruption ? 'unknown' : deletionCause(p, nodes.store.get(node), deletedAt, taintedSince(node));
      deletions.push({ pod: `${p.namespace}/${p.name}`, node: p.nodeName ?? '', at: now, how, cause });
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
      watches: [pods, nodes],
      judge() {
        const n = deletions.length;
        const byCause = new Map<string, number>();
        for (const d of deletions) byCause.set(d.cause, (byCause.get(d.cause) ?? 0) + 1);
        const causes = [...byCause].map(([c, k]) => `${k} ${c}`).join(', ');
        const latest = deletions.slice(-3).map((d) => `${d.pod} on ${d.node}`).join(', ');
        return {
          status: n > params.max ? 'violated' : 'ok',
          value: { count: n, deletions: deletions.slice(-50) },
          detail: n ? `${n} pod${n === 1 ? '' : 's'} deleted (${causes}): ${latest}${n > 3 ? ', …' : ''}` : 'no pod deleted',
          key: `${n}`,
        };
      },
    });
  },
});
