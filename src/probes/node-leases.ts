import { READ_NODE_LEASES, READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { trackNodeSelection } from '../kube/node-selection.js';
import { gated, reactive, sameLabels, watching } from '../contract/readings.js';
import { NODE_LEASE_NAMESPACE, type SlimLease, watchSpecs } from '../kube/resources.js';
import { formatDuration } from '../core/duration.js';
import { NodeSelector } from '../runbook/selectors.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, REPORTED_ENTRIES } from '../contract/probe.js';

const Params = z.strictObject({
  nodes: NodeSelector.default('all').meta({ description: 'which nodes: all, workers, control-plane or a selector' }),
  staleAfter: duration()
    .optional()
    .meta({ description: "a lease older than this is stale; each lease's own leaseDurationSeconds when absent" }),
});

/** What a node-leases reading says. */
export interface NodeLeasesValue {
  nodes: LeaseAge[];
  /** The selected nodes whose lease is stale (or missing). */
  stale: string[];
}

export interface LeaseAge {
  name: string;
  /** ms since the last renewal; null when the node has no lease. */
  ageMs: number | null;
  stale: boolean;
}

/** Node heartbeats: the age of each selected node's Lease in kube-node-lease. */
export default defineProbe({
  meta: {
    access: [READ_NODES, READ_NODE_LEASES],
    id: 'node-leases',
    summary: "Each selected node's Lease age; violated when one is older than staleAfter.",
    description:
      'Watches the Leases in `kube-node-lease` that kubelets renew (every 10 s by default, a quarter of the lease duration). ' +
      "A selected node whose lease was last renewed longer than `staleAfter` ago (or its lease's own duration) is stale, " +
      'and so is a node with no lease: the reading is violated while any is. The reading changes the moment a lease turns ' +
      'stale (a timer, not a poll) and the moment a renewal arrives; while many arrive at once (thousands of leases ' +
      'stale and coming back), every quarter second. Unknown while the apiserver cannot be watched.',
    params: Params,
    report: (v: NodeLeasesValue) => ({ stale: v.stale.slice(0, REPORTED_ENTRIES) }),
    notOkNodes: (v: NodeLeasesValue) => v.stale,
    nodeFacts: {
      kinds: ['lease'],
      of: (v: NodeLeasesValue) => v.nodes.map((n) => ({ kind: 'lease', node: n.name, ageMs: n.ageMs, stale: n.stale })),
    },
  },
  start(ctx, params) {
    return watching(ctx, { nodes: watchSpecs.nodes(), leases: watchSpecs.nodeLeases() }, ({ nodes, leases }) => {
      const limitOf = (l: SlimLease) => params.staleAfter ?? (l.durationSeconds ?? 40) * 1000;
      // A renewal of a lease that was fresh changes nothing a reading says (the moment it would turn stale comes
      // from recheckAt); nor does a node's status update. At thousands of nodes these are nearly every event.
      const woken = [
        gated(nodes, (c) => c.type !== 'modified' || c.previous === undefined || !sameLabels(c.previous.labels, c.object.labels)),
        gated(leases, (c) => {
          const before = c.previous;
          return (
            c.type !== 'modified' ||
            before?.renewTime === undefined ||
            ctx.clock.now() - before.renewTime > limitOf(before) ||
            before.durationSeconds !== c.object.durationSeconds
          );
        }),
      ];
      const selection = trackNodeSelection(params.nodes, ctx.inventory.spec.nodes, nodes);
      // the store keys of the selected nodes' Leases, made once per selection
      let keysOf: { names: readonly string[]; keys: string[] } | undefined;
      // The reading's key: a number that changes whenever the selection or its stale nodes do. With thousands of
      // leases stale, joining their names per judgement (several a second in a storm of renewals) cost more than
      // the rest of the judgement; the stale nodes are compared by place in the selection instead.
      let last: { names: readonly string[]; stale: number[] } | undefined;
      let version = 0;
      return reactive(ctx, {
        watches: woken,
        // while thousands of leases are stale, every renewal that comes in matters: judge them in batches of a quarter
        // second (a lone change is judged at once), not a pass over every lease, and a reading, per renewal
        minIntervalMs: 250,
        judge(now) {
          const names = selection.names();
          if (keysOf?.names !== names) keysOf = { names, keys: names.map((n) => `${NODE_LEASE_NAMESPACE}/${n}`) };
          const { keys } = keysOf;
          const ages: LeaseAge[] = [];
          const staleAt: number[] = [];
          let recheckAt = Infinity;
          let oldest = 0;
          for (const [i, name] of names.entries()) {
            const lease = leases.store.get(keys[i]!);
            if (lease?.renewTime === undefined) {
              ages.push({ name, ageMs: null, stale: true });
              staleAt.push(i);
              continue;
            }
            const limit = limitOf(lease);
            const age = now - lease.renewTime;
            ages.push({ name, ageMs: age, stale: age > limit });
            oldest = Math.max(oldest, age);
            if (age > limit) staleAt.push(i);
            else recheckAt = Math.min(recheckAt, lease.renewTime + limit + 1);
          }
          const before = last;
          if (before?.names !== names || before.stale.length !== staleAt.length || staleAt.some((k, i) => before.stale[i] !== k)) version++;
          last = { names, stale: staleAt };
          const stale = staleAt.map((k) => ages[k]!);
          const detail = !names.length
            ? 'no node selected'
            : stale.length
              ? `${stale.length}/${names.length} leases stale: ${stale
                  .slice(0, 5)
                  .map((a) => (a.ageMs === null ? `${a.name} (no lease)` : `${a.name} ${formatDuration(a.ageMs)}`))
                  .join(', ')}${stale.length > 5 ? ', …' : ''}`
              : `${names.length}/${names.length} leases fresh (oldest ${formatDuration(oldest)})`;
          return {
            status: stale.length || !names.length ? 'violated' : 'ok',
            value: { nodes: ages, stale: stale.map((a) => a.name) } satisfies NodeLeasesValue,
            detail,
            key: String(version),
            recheckAt,
          };
        },
      });
    });
  },
});
