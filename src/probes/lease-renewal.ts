import { READ_NODE_LEASES, READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { defineProbe, REPORTED_ENTRIES } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { type SlimLease, watchSpecs } from '../kube/resources.js';

const Params = z.strictObject({
  maxLateness: duration().prefault('5s').meta({
    description:
      "violated when a pool's p99 lateness, or a renewal not come yet, is later than this: how much later than its interval a renewal may come",
  }),
  window: duration().prefault('2m').meta({ description: 'renewals seen within this window make the percentiles' }),
  renewInterval: duration().optional().meta({
    description: "how often kubelets renew; a quarter of each lease's duration when absent (the kubelet's own rule: 10 s for 40 s)",
  }),
  poolLabel: z
    .string()
    .regex(/^([a-z0-9.-]+\/)?[A-Za-z0-9._-]+$/, { message: 'expected a label key' })
    .optional()
    .meta({
      description: "node label whose value names a node's pool (e.g. eks.amazonaws.com/nodegroup); control plane and workers when absent",
    }),
  minSamples: z
    .number()
    .int()
    .min(1)
    .default(20)
    .meta({ description: 'a pool with fewer renewals in the window is not judged (its percentiles say little)' }),
});

/** One pool's renewal lateness over the window. */
export interface PoolLateness {
  pool: string;
  nodes: number;
  /** Renewals seen in the window. */
  samples: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The nodes whose last renewal was the latest, latest first (up to 5). */
  latest: { node: string; latenessMs: number }[];
  /** The nodes whose next renewal is already later than their interval, latest first (up to 5): how late it is so far. */
  overdue: { node: string; overdueMs: number }[];
}

export interface LeaseRenewalValue {
  pools: PoolLateness[];
}

/** Lateness histogram: 100 ms buckets up to a minute, the last one open. */
const BUCKET_MS = 100;
const BUCKETS = 601;
/** The window is kept as this many slots, each a histogram; the oldest is dropped as time moves on. */
const SLOTS = 12;

interface Slot {
  start: number;
  counts: Uint32Array;
  n: number;
  max: number;
}

/**
 * How late node Leases are renewed, per node pool: every renewal a watch brings (not a relist, which may span
 * several) gives its gap since the node's previous one; its lateness is the gap less the renew interval. A renewal
 * that is due and has not come is overdue by the Lease's age less the interval, judged at each judgement. The earliest
 * sign of an overloaded control plane (incident 002): renewals come late well before a node misses its grace period.
 * Kept as per-slot histograms, so the percentiles cost the same at 5 nodes and 5,000; what is overdue is one pass
 * over the Leases, at most once a second.
 */
export default defineProbe({
  meta: {
    access: [READ_NODES, READ_NODE_LEASES],
    id: 'lease-renewal',
    summary:
      'How late node Leases are renewed, per pool (p50, p90, p99, max); violated when a p99, or a renewal not come yet, is later than maxLateness.',
    description:
      "Watches the node Leases and, for every renewal, takes its gap since the node's previous renewal less the renew " +
      "interval (`renewInterval`, else a quarter of the lease's duration, as the kubelet renews): how late it came. Over " +
      'the last `window` it gives, per node pool (the value of `poolLabel`, else control plane and workers), the p50, ' +
      'p90, p99 and largest lateness and the nodes that were latest. A renewal that has not come yet is late already: ' +
      'each node whose Lease is older than its interval counts as overdue by how much, at once, without waiting for it. ' +
      'Late renewals are what an overloaded apiserver or etcd, or a starved kubelet, shows first: a node goes NotReady ' +
      'only once one comes later than the grace period. Violated when a pool with at least `minSamples` renewals has its ' +
      'p99 above `maxLateness`, or when any node is overdue by more than `maxLateness` (a timer, not a poll); unknown ' +
      'while the apiserver cannot be watched.',
    params: Params,
    report: (v: LeaseRenewalValue) => ({
      pools: v.pools.slice(0, REPORTED_ENTRIES).map(({ latest: _, overdue, ...p }) => ({ ...p, overdueMs: overdue[0]?.overdueMs ?? 0 })),
    }),
  },
  start(ctx, params) {
    return watching(ctx, { nodes: watchSpecs.nodes(), leases: watchSpecs.nodeLeases() }, ({ nodes, leases }, watches) => {
      const slotMs = Math.max(1000, Math.ceil(params.window / SLOTS));
      const intervalOf = (l: SlimLease) => params.renewInterval ?? (l.durationSeconds ?? 40) * 250;
      const slots = new Map<string, Slot[]>();
      const latestOf = new Map<string, number>();
      const poolOf = (node: string): string => {
        const labels = nodes.store.get(node)?.labels;
        if (params.poolLabel) return labels?.[params.poolLabel] ?? '(no label)';
        return labels && 'node-role.kubernetes.io/control-plane' in labels ? 'control-plane' : 'workers';
      };
      leases.subscribe((c) => {
        if (c.type === 'deleted') latestOf.delete(c.object.name);
        if (c.type !== 'modified' || c.relist || !c.previous) return;
        const before = c.previous.renewTime;
        const after = c.object.renewTime;
        if (before === undefined || after === undefined || after <= before) return;
        const late = Math.max(0, after - before - intervalOf(c.object));
        latestOf.set(c.object.name, late);
        const pool = poolOf(c.object.name);
        const now = ctx.clock.now();
        let list = slots.get(pool);
        if (!list) slots.set(pool, (list = []));
        let slot = list.at(-1);
        if (!slot || now - slot.start >= slotMs) list.push((slot = { start: now, counts: new Uint32Array(BUCKETS), n: 0, max: 0 }));
        slot.counts[Math.min(BUCKETS - 1, Math.floor(late / BUCKET_MS))]!++;
        slot.n++;
        slot.max = Math.max(slot.max, late);
      });
      return reactive(ctx, {
        watches,
        // a renewal of every node every 10 s: judged each second at most
        minIntervalMs: 1000,
        refreshMs: 5000,
        judge(now) {
          const pools: PoolLateness[] = [];
          const members = new Map<string, string[]>();
          for (const name of nodes.store.keys()) {
            const p = poolOf(name);
            const list = members.get(p);
            if (list) list.push(name);
            else members.set(p, [name]);
          }
          // a renewal that has not come yet is late already: a kubelet starved or cut off for good renews no more
          const overdueOf = new Map<string, { node: string; overdueMs: number }[]>();
          let dueAt = Infinity;
          for (const lease of leases.store.values()) {
            if (lease.renewTime === undefined || !nodes.store.has(lease.name)) continue;
            const due = lease.renewTime + intervalOf(lease);
            if (now <= due) {
              dueAt = Math.min(dueAt, due + params.maxLateness + 1);
              continue;
            }
            if (now - due <= params.maxLateness) dueAt = Math.min(dueAt, due + params.maxLateness + 1);
            const pool = poolOf(lease.name);
            const list = overdueOf.get(pool);
            const entry = { node: lease.name, overdueMs: now - due };
            if (list) list.push(entry);
            else overdueOf.set(pool, [entry]);
          }
          for (const pool of overdueOf.keys()) if (!slots.has(pool)) slots.set(pool, []);
          for (const [pool, list] of slots) {
            while (list.length && now - list[0]!.start >= params.window) list.shift();
            const merged = new Uint32Array(BUCKETS);
            let n = 0;
            let max = 0;
            for (const s of list) {
              for (let i = 0; i < BUCKETS; i++) merged[i]! += s.counts[i]!;
              n += s.n;
              max = Math.max(max, s.max);
            }
            const overdue = (overdueOf.get(pool) ?? [])
              .sort((a, b) => b.overdueMs - a.overdueMs || a.node.localeCompare(b.node))
              .slice(0, 5);
            if (!n && !overdue.length) continue;
            const names = members.get(pool) ?? [];
            const latest = names
              .map((node) => ({ node, latenessMs: latestOf.get(node) ?? 0 }))
              .filter((l) => l.latenessMs > 0)
              .sort((a, b) => b.latenessMs - a.latenessMs || a.node.localeCompare(b.node))
              .slice(0, 5);
            const q = (x: number) => (n ? percentile(merged, n, x, max) : 0);
            pools.push({
              pool,
              nodes: names.length,
              samples: n,
              p50Ms: q(0.5),
              p90Ms: q(0.9),
              p99Ms: q(0.99),
              maxMs: max,
              latest,
              overdue,
            });
          }
          pools.sort((a, b) => a.pool.localeCompare(b.pool));
          const judged = pools.filter((p) => p.samples >= params.minSamples);
          const overdue = pools.filter((p) => (p.overdue[0]?.overdueMs ?? 0) > params.maxLateness);
          const late = judged.filter((p) => p.p99Ms > params.maxLateness);
          const sayLate = (p: PoolLateness) =>
            `p99 ${formatDuration(p.p99Ms)} late (p50 ${formatDuration(p.p50Ms)}, p90 ${formatDuration(p.p90Ms)}, max ${formatDuration(p.maxMs)}, ${p.samples} renewals` +
            `${p.latest[0] ? `; latest ${p.latest[0].node}` : ''})`;
          const sayOverdue = (p: PoolLateness) => {
            const o = p.overdue.filter((x) => x.overdueMs > params.maxLateness);
            return `${o
              .slice(0, 3)
              .map((x) => `${x.node} ${formatDuration(x.overdueMs)}`)
              .join(', ')}${o.length > 3 ? ', …' : ''} late and not renewed yet`;
          };
          const bad = pools.filter((p) => overdue.includes(p) || late.includes(p));
          const detail = !pools.length
            ? 'no renewal seen yet'
            : bad.length
              ? bad
                  .map(
                    (p) =>
                      `${p.pool}: ${[...(overdue.includes(p) ? [sayOverdue(p)] : []), ...(late.includes(p) ? [sayLate(p)] : [])].join('; ')}`,
                  )
                  .join('; ')
              : judged.length
                ? judged.map((p) => `${p.pool}: ${sayLate(p)}`).join('; ')
                : `too few renewals yet (${pools.map((p) => `${p.pool} ${p.samples}`).join(', ')}; ${params.minSamples} needed)`;
          return {
            status: bad.length ? 'violated' : 'ok',
            value: { pools } satisfies LeaseRenewalValue,
            detail,
            key: `${late.map((p) => p.pool).join(',')}|${overdue.map((p) => p.pool).join(',')}|${judged.length}`,
            // the oldest slot leaves the window, or a renewal that has not come becomes later than maxLateness
            recheckAt: Math.min(...[...slots.values()].flatMap((l) => (l[0] ? [l[0].start + params.window] : [])), dueAt),
          };
        },
      });
    });
  },
});

/** The q-th quantile of a histogram of `n` values: its bucket's upper edge, never above the largest value seen. */
function percentile(counts: Uint32Array, n: number, q: number, max: number): number {
  const rank = Math.ceil(q * n);
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i]!;
    if (seen >= rank) return Math.min(max, (i + 1) * BUCKET_MS);
  }
  return max;
}
