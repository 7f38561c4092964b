import { READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { trackNodeSelection } from '../kube/node-selection.js';
import { gated, reactive, sameLabels, watching } from '../contract/readings.js';
import { watchSpecs } from '../kube/resources.js';
import { formatDuration } from '../core/duration.js';
import { NodeSelector } from '../runbook/selectors.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, REPORTED_ENTRIES } from '../contract/probe.js';

const Params = z.strictObject({
  nodes: NodeSelector.default('all').meta({ description: 'which nodes: all, workers, control-plane or a selector' }),
  allowNotReady: z
    .number()
    .int()
    .min(0)
    .default(0)
    .meta({ description: 'how many selected nodes may be not Ready before the reading is violated' }),
  flapping: z
    .strictObject({
      transitions: z.number().int().min(2).default(3).meta({ description: 'Ready transitions of one node…' }),
      window: duration().prefault('5m').meta({ description: '…within this window count as flapping' }),
    })
    .prefault({})
    .meta({ description: 'a node whose Ready condition flips this often is flapping (incident 3): violated' }),
});

export interface NodeReadyValue {
  ready: number;
  notReady: number;
  total: number;
  nodes: { name: string; status: string; transitions: number }[];
  flapping: string[];
}

/** The Ready condition of nodes: counts, transitions and flapping. */
export default defineProbe({
  meta: {
    access: [READ_NODES],
    id: 'node-ready',
    summary: 'Ready condition of the selected nodes: counts, transitions, flapping.',
    description:
      'Watches Nodes. The reading is ok while at most `allowNotReady` selected nodes are not Ready and none is flapping; ' +
      'a node is flapping when its Ready condition changed `flapping.transitions` times within `flapping.window` ' +
      '(a grace period too close to the lease renew interval does that — incident 3). Transitions are counted from ' +
      'the watch (each change of status or of lastTransitionTime) since the probe started. Unknown while the apiserver ' +
      'cannot be watched.',
    params: Params,
    notOkNodes: (v: NodeReadyValue) => v.nodes.filter((n) => n.status !== 'True').map((n) => n.name),
    nodeFacts: { kinds: ['ready'], of: (v: NodeReadyValue) => v.nodes.map((n) => ({ kind: 'ready', node: n.name, status: n.status })) },
    report: (v: NodeReadyValue) => ({
      ready: v.ready,
      total: v.total,
      notReady: v.nodes
        .filter((n) => n.status !== 'True')
        .slice(0, REPORTED_ENTRIES)
        .map((n) => `${n.name} ${n.status}`),
    }),
  },
  start(ctx, params) {
    return watching(ctx, { nodes: watchSpecs.nodes() }, ({ nodes }) => {
      const transitions = new Map<string, number[]>();
      let synced = nodes.freshness().synced;
      nodes.subscribe((c) => {
        if (c.type === 'synced') synced = true;
        if (c.type !== 'modified' || !synced) return;
        const before = c.previous?.ready;
        const after = c.object.ready;
        if (before?.status === after?.status && before?.transition === after?.transition) return;
        transitions.set(c.key, [...(transitions.get(c.key) ?? []), ctx.clock.now()]);
      });
      const { window } = params.flapping;
      // a heartbeat (a status update that leaves Ready as it was) changes nothing a reading says
      const woken = [
        gated(nodes, (c) => {
          const [a, b] = [c.previous, c.object];
          return (
            a === undefined ||
            a.ready?.status !== b.ready?.status ||
            a.ready?.transition !== b.ready?.transition ||
            !sameLabels(a.labels, b.labels)
          );
        }),
      ];
      const selection = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
      return reactive(ctx, {
        watches: woken,
        judge(now) {
          const names = selection.names();
          let recheckAt = Infinity;
          const rows = names.map((name) => {
            const recent = (transitions.get(name) ?? []).filter((t) => t > now - window);
            transitions.set(name, recent);
            if (recent.length) recheckAt = Math.min(recheckAt, recent[0]! + window + 1);
            return {
              name,
              status: nodes.store.get(name)?.ready?.status ?? (nodes.store.has(name) ? 'none' : 'missing'),
              transitions: recent.length,
            };
          });
          const notReady = rows.filter((r) => r.status !== 'True');
          const flapping = rows.filter((r) => r.transitions >= params.flapping.transitions).map((r) => r.name);
          const value: NodeReadyValue = {
            ready: rows.length - notReady.length,
            notReady: notReady.length,
            total: rows.length,
            nodes: rows,
            flapping,
          };
          const bad = notReady.length > params.allowNotReady || flapping.length > 0 || rows.length === 0;
          const parts = [`${value.ready}/${value.total} Ready`];
          if (notReady.length)
            parts.push(
              `not Ready: ${notReady
                .slice(0, 5)
                .map((r) => `${r.name} (${r.status})`)
                .join(', ')}${notReady.length > 5 ? ', …' : ''}`,
            );
          if (flapping.length)
            parts.push(`flapping (≥${params.flapping.transitions} transitions in ${formatDuration(window)}): ${flapping.join(', ')}`);
          return { status: bad ? 'violated' : 'ok', value, detail: parts.join('; '), recheckAt };
        },
      });
    });
  },
});
