import { READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { trackNodeSelection } from '../kube/node-selection.js';
import { gated, reactive, sameLabels, watching } from '../contract/readings.js';
import { watchSpecs } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import { formatDuration } from '../core/duration.js';
import { NodeSelector } from '../runbook/selectors.js';
import { defineProbe, REPORTED_ENTRIES } from '../contract/probe.js';
import type { NodeFact } from '../contract/node-facts.js';

const Params = z.strictObject({
  nodes: NodeSelector.default('all').meta({ description: 'which nodes: all, workers, control-plane or a selector' }),
  keys: z
    .array(z.string().min(1))
    .min(1)
    .default([UNREACHABLE, NOT_READY])
    .meta({ description: 'taint keys that count (NoExecute effect only)' }),
  max: z.number().int().min(0).default(0).meta({ description: 'violated when more selected nodes than this carry such a taint' }),
});

/** What a noexecute-taints reading says. */
export interface NoExecuteTaintsValue {
  tainted: TaintedNode[];
  /** How many selected nodes carry one of the keys. */
  nodes: number;
}

export interface TaintedNode {
  node: string;
  key: string;
  /** When the taint was added (clock ms), if the apiserver says. */
  addedAt: number | null;
}

/** Each tainted node with its taints' keys, sorted: every reading lists every tainted node it watches. */
function taintFacts(tainted: readonly TaintedNode[]): NodeFact[] {
  const keys = new Map<string, string[]>();
  for (const t of tainted) {
    const k = keys.get(t.node);
    if (k) k.push(t.key);
    else keys.set(t.node, [t.key]);
  }
  return [...keys].map(([node, k]) => ({ kind: 'taints', node, keys: k.sort() }));
}

/** The NoExecute taints the node lifecycle controller puts on unreachable or not-ready nodes. */
export default defineProbe({
  meta: {
    access: [READ_NODES],
    id: 'noexecute-taints',
    summary: 'Unreachable/not-ready NoExecute taints on the selected nodes and when they were added.',
    description:
      'Watches Nodes for the `node.kubernetes.io/unreachable` and `node.kubernetes.io/not-ready` taints with effect ' +
      'NoExecute (or the `keys` given). Once such a taint is on a node, the taint manager deletes every pod whose ' +
      'toleration of it runs out. Violated while more than `max` selected nodes carry one; the value lists each with ' +
      'the time it was added. Unknown while the apiserver cannot be watched.',
    params: Params,
    notOkNodes: (v: NoExecuteTaintsValue) => [...new Set(v.tainted.map((t) => t.node))],
    nodeFacts: { kinds: ['taints'], of: (v: NoExecuteTaintsValue) => taintFacts(v.tainted) },
    report: (v: NoExecuteTaintsValue) => ({ tainted: v.tainted.slice(0, REPORTED_ENTRIES).map((t) => `${t.node} ${t.key}`) }),
  },
  start(ctx, params) {
    return watching(ctx, { nodes: watchSpecs.nodes() }, ({ nodes }) => {
      const keys = new Set(params.keys);
      // only a change of taints or labels can change a reading; heartbeats are most node updates
      const woken = [
        gated(
          nodes,
          (c) =>
            c.previous === undefined ||
            JSON.stringify(c.previous.taints) !== JSON.stringify(c.object.taints) ||
            !sameLabels(c.previous.labels, c.object.labels),
        ),
      ];
      const selection = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
      return reactive(ctx, {
        watches: woken,
        judge(now) {
          const names = selection.names();
          const tainted: TaintedNode[] = [];
          for (const name of names)
            for (const t of nodes.store.get(name)?.taints ?? [])
              if (t.effect === 'NoExecute' && keys.has(t.key)) tainted.push({ node: name, key: t.key, addedAt: t.timeAdded ?? null });
          const count = new Set(tainted.map((t) => t.node)).size;
          const detail = tainted.length
            ? tainted
                .slice(0, 5)
                .map(
                  (t) =>
                    `${t.node} ${t.key.replace('node.kubernetes.io/', '')}${t.addedAt === null ? '' : ` since ${formatDuration(now - t.addedAt)}`}`,
                )
                .join(', ') + (tainted.length > 5 ? ', …' : '')
            : `no NoExecute taint on ${names.length} nodes`;
          return {
            status: count > params.max ? 'violated' : 'ok',
            value: { tainted, nodes: count } satisfies NoExecuteTaintsValue,
            detail,
            key: `${count > params.max}|${tainted.map((t) => `${t.node}/${t.key}`).join(',')}`,
          };
        },
      });
    });
  },
});
