import { READ_NODE_LEASES, READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { type Judgement, reactive, watching } from '../contract/readings.js';
import { defineProbe, REPORTED_ENTRIES } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { type SlimLease, type SlimNode, watchSpecs } from '../kube/resources.js';
import type { WatchHandle } from '../kube/watch.js';
import type { Change } from '../kube/watch-types.js';

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
      const renewals = new Renewals(params, nodes, leases);
      leases.subscribe((c) => renewals.onLease(c, ctx.clock.now()));
      return reactive(ctx, {
        watches,
        // a renewal of every node every 10 s: judged each second at most
        minIntervalMs: 1000,
        refreshMs: 5000,
        judge: (now) => renewals.judge(now),
      });
    });
  },
});

type Params = z.output<typeof Params>;

/** The renewals seen over the window, per pool in slots, and each node's last lateness. */
class Renewals {
  private readonly slotMs: number;
  private readonly slots = new Map<string, Slot[]>();
  private readonly latestOf = new Map<string, number>();

  constructor(
    private readonly params: Params,
    private readonly nodes: WatchHandle<SlimNode>,
    private readonly leases: WatchHandle<SlimLease>,
  ) {
    this.slotMs = Math.max(1000, Math.ceil(params.window / SLOTS));
  }

  private intervalOf(l: SlimLease): number {
    return this.params.renewInterval ?? (l.durationSeconds ?? 40) * 250;
  }

  private poolOf(node: string): string {
    const labels = this.nodes.store.get(node)?.labels;
    if (this.params.poolLabel) return labels?.[this.params.poolLabel] ?? '(no label)';
    return labels && 'node-role.kubernetes.io/control-plane' in labels ? 'control-plane' : 'workers';
  }

  /** A renewal a watch brought (not a relist): its lateness, counted in its pool's current slot. */
  onLease(c: Change<SlimLease>, now: number): void {
    if (c.type === 'deleted') this.latestOf.delete(c.object.name);
    if (c.type !== 'modified' || c.relist || !c.previous) return;
    const before = c.previous.renewTime;
    const after = c.object.renewTime;
    if (before === undefined || after === undefined || after <= before) return;
    const late = Math.max(0, after - before - this.intervalOf(c.object));
    this.latestOf.set(c.object.name, late);
    const pool = this.poolOf(c.object.name);
    let list = this.slots.get(pool);
    if (!list) this.slots.set(pool, (list = []));
    let slot = list.at(-1);
    if (!slot || now - slot.start >= this.slotMs) list.push((slot = { start: now, counts: new Uint32Array(BUCKETS), n: 0, max: 0 }));
    slot.counts[Math.min(BUCKETS - 1, Math.floor(late / BUCKET_MS))]!++;
    slot.n++;
    slot.max = Math.max(slot.max, late);
  }

  judge(now: number): Judgement<LeaseRenewalValue> {
    const { params, slots } = this;
    const members = this.members();
    const { overdueOf, dueAt } = this.overdue(now);
    for (const pool of overdueOf.keys()) if (!slots.has(pool)) slots.set(pool, []);
    const pools: PoolLateness[] = [];
    for (const [pool, list] of slots) {
      const p = this.poolLateness(pool, list, now, members.get(pool) ?? [], overdueOf.get(pool) ?? []);
      if (p) pools.push(p);
    }
    pools.sort((a, b) => a.pool.localeCompare(b.pool));
    const judged = pools.filter((p) => p.samples >= params.minSamples);
    const overdue = pools.filter((p) => (p.overdue[0]?.overdueMs ?? 0) > params.maxLateness);
    const late = judged.filter((p) => p.p99Ms > params.maxLateness);
    const bad = pools.filter((p) => overdue.includes(p) || late.includes(p));
    return {
      status: bad.length ? 'violated' : 'ok',
      value: { pools } satisfies LeaseRenewalValue,
      detail: describe(params, { pools, judged, overdue, late, bad }),
      key: `${late.map((p) => p.pool).join(',')}|${overdue.map((p) => p.pool).join(',')}|${judged.length}`,
      // the oldest slot leaves the window, or a renewal that has not come becomes later than maxLateness
      recheckAt: Math.min(...[...slots.values()].flatMap((l) => (l[0] ? [l[0].start + params.window] : [])), dueAt),
    };
  }

  /** The nodes of each pool. */
  private members(): Map<string, string[]> {
    const members = new Map<string, string[]>();
    for (const name of this.nodes.store.keys()) {
      const p = this.poolOf(name);
      const list = members.get(p);
      if (list) list.push(name);
      else members.set(p, [name]);
    }
    return members;
  }

  /**
   * A renewal that has not come yet is late already: a kubelet starved or cut off for good renews no more. The nodes
   * overdue per pool, and when the next renewal not come becomes later than maxLateness.
   */
  private overdue(now: number): { overdueOf: Map<string, { node: string; overdueMs: number }[]>; dueAt: number } {
    const { maxLateness } = this.params;
    const overdueOf = new Map<string, { node: string; overdueMs: number }[]>();
    let dueAt = Infinity;
    for (const lease of this.leases.store.values()) {
      if (lease.renewTime === undefined || !this.nodes.store.has(lease.name)) continue;
      const due = lease.renewTime + this.intervalOf(lease);
      if (now <= due) {
        dueAt = Math.min(dueAt, due + maxLateness + 1);
        continue;
      }
      if (now - due <= maxLateness) dueAt = Math.min(dueAt, due + maxLateness + 1);
      const pool = this.poolOf(lease.name);
      const list = overdueOf.get(pool);
      const entry = { node: lease.name, overdueMs: now - due };
      if (list) list.push(entry);
      else overdueOf.set(pool, [entry]);
    }
    return { overdueOf, dueAt };
  }

  /** One pool over the window (its slots that left it dropped); undefined when it has no renewal and none overdue. */
  private poolLateness(
    pool: string,
    list: Slot[],
    now: number,
    names: string[],
    overdueNodes: { node: string; overdueMs: number }[],
  ): PoolLateness | undefined {
    while (list.length && now - list[0]!.start >= this.params.window) list.shift();
    const merged = new Uint32Array(BUCKETS);
    let n = 0;
    let max = 0;
    for (const s of list) {
      for (let i = 0; i < BUCKETS; i++) merged[i]! += s.counts[i]!;
      n += s.n;
      max = Math.max(max, s.max);
    }
    const overdue = overdueNodes.sort((a, b) => b.overdueMs - a.overdueMs || a.node.localeCompare(b.node)).slice(0, 5);
    if (!n && !overdue.length) return undefined;
    const latest = names
      .map((node) => ({ node, latenessMs: this.latestOf.get(node) ?? 0 }))
      .filter((l) => l.latenessMs > 0)
      .sort((a, b) => b.latenessMs - a.latenessMs || a.node.localeCompare(b.node))
      .slice(0, 5);
    const q = (x: number) => (n ? percentile(merged, n, x, max) : 0);
    return { pool, nodes: names.length, samples: n, p50Ms: q(0.5), p90Ms: q(0.9), p99Ms: q(0.99), maxMs: max, latest, overdue };
  }
}

/** A reading's detail: the pools late or overdue, else each judged pool's lateness, else how many renewals are still needed. */
function describe(
  params: Params,
  { pools, judged, overdue, late, bad }: Record<'pools' | 'judged' | 'overdue' | 'late' | 'bad', PoolLateness[]>,
): string {
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
  if (!pools.length) return 'no renewal seen yet';
  if (bad.length)
    return bad
      .map((p) => `${p.pool}: ${[...(overdue.includes(p) ? [sayOverdue(p)] : []), ...(late.includes(p) ? [sayLate(p)] : [])].join('; ')}`)
      .join('; ');
  if (judged.length) return judged.map((p) => `${p.pool}: ${sayLate(p)}`).join('; ');
  return `too few renewals yet (${pools.map((p) => `${p.pool} ${p.samples}`).join(', ')}; ${params.minSamples} needed)`;
}

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
