/**
 * Per-node history a report keeps for the timeline's node lanes: Lease age, the Ready condition, NoExecute taints
 * and pods deleted, read from the values of probe readings (guards, expect steps, observers) by their shape, so no
 * probe has to know about reports. Changes only, each list capped.
 */

/** A Lease age seen: at a renewal or a change of staleness (`ageMs` null: the node has no Lease). */
export interface LeaseSample {
  at: string;
  ageMs: number | null;
  stale: boolean;
}

/** The history of one node, each list in time order. */
export interface NodeSeries {
  node: string;
  lease: LeaseSample[];
  /** The Ready condition's status at each change (True, False, Unknown; `none` without one, `missing` without the Node). */
  ready: { at: string; status: string }[];
  /** The NoExecute taint keys at each change (empty: none). */
  taints: { at: string; keys: string[] }[];
  deleted: { at: string; pod: string; cause: string }[];
  /** Entries not kept past the caps. */
  dropped?: number;
}

/** Lease samples kept per node before older renewals are thinned out (staleness changes always stay): 20 min of 10 s renewals. */
const MAX_LEASE = 120;
/** Ready, taint and deletion entries kept per node. */
const MAX_CHANGES = 200;
/** Nodes shown that nothing happened to (beside faults' targets and nodes that were stale, not Ready, tainted or lost pods). */
const MAX_QUIET = 10;
/** Nodes shown in all, faults' targets aside (they always are); past that, counted. */
const MAX_SHOWN = 50;

/** How much a source is believed: a run's observers watch every node, a guard or an expect step may watch fewer. */
export type SourceRank = 1 | 2;

type Kind = 'lease' | 'ready' | 'taints' | 'deleted';

/** A reading's moment, as the report writes it and as a number (one of each per reading, not per node). */
interface Stamp {
  iso: string;
  ms: number;
}

interface Fact {
  node: string;
  kind: Kind;
  apply: (s: NodeSeries, at: Stamp, renewals: Renewals) => boolean;
}

/**
 * When each node's last Lease sample says it was renewed (ms; null: no Lease), kept beside the series so that telling
 * a renewal from the same one seen again does not parse the sample's time: a node-leases reading speaks of every
 * node, and in a storm of renewals there are several readings a second.
 */
type Renewals = Map<string, number | null>;

const iso = (at: number) => new Date(at).toISOString();
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const listOf = (v: unknown, key: string): Record<string, unknown>[] | undefined => {
  const l = isObj(v) ? v[key] : undefined;
  return Array.isArray(l) && l.every(isObj) ? l : undefined;
};

/** Appends a change, or counts it as dropped past the cap. */
function push<T>(s: NodeSeries, list: T[], entry: T): void {
  if (list.length < MAX_CHANGES) list.push(entry);
  else s.dropped = (s.dropped ?? 0) + 1;
}

function leaseFact(node: string, ageMs: number | null, stale: boolean): Fact {
  return {
    node,
    kind: 'lease',
    apply(s, at, renewals) {
      const last = s.lease.at(-1);
      const renewal = ageMs === null ? null : at.ms - ageMs;
      const before = renewals.get(node);
      const renewed = last !== undefined && renewal !== null && last.ageMs !== null && Math.abs((before ?? 0) - renewal) > 1;
      if (last && last.stale === stale && (last.ageMs === null) === (ageMs === null) && !renewed) return stale;
      renewals.set(node, renewal);
      s.lease.push({ at: at.iso, ageMs, stale });
      if (s.lease.length > MAX_LEASE) thin(s);
      return stale;
    },
  };
}

/** Every other renewal dropped, staleness changes and the latest sample kept; past the cap even so, the oldest. */
function thin(s: NodeSeries): void {
  const before = s.lease.length;
  s.lease = s.lease.filter(
    (x, i, all) =>
      i % 2 === 0 || i === all.length - 1 || x.stale !== all[i - 1]!.stale || (x.ageMs === null) !== (all[i - 1]!.ageMs === null),
  );
  if (s.lease.length > MAX_LEASE) s.lease = s.lease.slice(s.lease.length - MAX_LEASE);
  s.dropped = (s.dropped ?? 0) + before - s.lease.length;
}

function readyFact(node: string, status: string): Fact {
  return {
    node,
    kind: 'ready',
    apply(s, at) {
      if (s.ready.at(-1)?.status !== status) push(s, s.ready, { at: at.iso, status });
      return status !== 'True';
    },
  };
}

function taintFact(node: string, keys: string[]): Fact {
  return {
    node,
    kind: 'taints',
    apply(s, at) {
      const last = s.taints.at(-1);
      if (last ? last.keys.join(',') !== keys.join(',') : keys.length > 0) push(s, s.taints, { at: at.iso, keys });
      return keys.length > 0;
    },
  };
}

function deletedFact(node: string, pod: string, at: number, cause: string): Fact {
  return {
    node,
    kind: 'deleted',
    apply(s) {
      const when = iso(at);
      if (!s.deleted.some((d) => d.pod === pod && Math.abs(Date.parse(d.at) - at) < 5_000)) push(s, s.deleted, { at: when, pod, cause });
      return true;
    },
  };
}

/**
 * What a reading's value says about nodes, by its shape: node-leases (`nodes[].ageMs`), node-ready
 * (`nodes[].status`), noexecute-taints (`tainted[]`: the nodes it lists; one it listed before and no longer does
 * is untainted, so `listedBefore` is what this source listed last) and pod-deletions (`deletions[]`).
 */
function factsOf(value: unknown, listedBefore: Set<string> | undefined): { facts: Fact[]; listed?: Set<string> } {
  const facts: Fact[] = [];
  const nodes = listOf(value, 'nodes');
  for (const n of nodes ?? []) {
    if (typeof n.name !== 'string') continue;
    if ((typeof n.ageMs === 'number' || n.ageMs === null) && typeof n.stale === 'boolean') facts.push(leaseFact(n.name, n.ageMs, n.stale));
    else if (typeof n.status === 'string' && typeof n.transitions === 'number') facts.push(readyFact(n.name, n.status));
  }
  const tainted = listOf(value, 'tainted');
  let listed: Set<string> | undefined;
  if (tainted) {
    const keys = new Map<string, string[]>();
    for (const t of tainted)
      if (typeof t.node === 'string' && typeof t.key === 'string') keys.set(t.node, [...(keys.get(t.node) ?? []), t.key].sort());
    for (const [node, k] of keys) facts.push(taintFact(node, k));
    for (const node of listedBefore ?? []) if (!keys.has(node)) facts.push(taintFact(node, []));
    listed = new Set(keys.keys());
  }
  for (const d of listOf(value, 'deletions') ?? [])
    if (typeof d.node === 'string' && d.node && typeof d.pod === 'string' && typeof d.at === 'number')
      facts.push(deletedFact(d.node, d.pod, d.at, typeof d.cause === 'string' ? d.cause : 'unknown'));
  return { facts, listed };
}

/**
 * Folds readings into per-node series. The report's `nodes` holds the nodes of interest: those a fault targeted,
 * those that were ever stale, not Ready, tainted or lost a pod, and the first MAX_QUIET others; MAX_SHOWN at most
 * beside faults' targets (`nodesLeftOut` counts the others it would show). The rest are followed too (a node may
 * turn interesting later) but keep only their first and latest Lease sample until shown.
 */
export class NodeTracker {
  private readonly all = new Map<string, NodeSeries>();
  private readonly admitted = new Set<string>();
  private readonly leftOut = new Set<string>();
  /** Per kind of fact, the best source heard on each node. */
  private readonly rank: Record<Kind, Map<string, SourceRank>> = {
    lease: new Map(),
    ready: new Map(),
    taints: new Map(),
    deleted: new Map(),
  };
  private readonly renewals: Renewals = new Map();
  private readonly listedBy = new Map<string, Set<string>>();
  private quiet = 0;

  /** `report.nodes` is filled in place. */
  constructor(private readonly report: { nodes: NodeSeries[]; nodesLeftOut?: number }) {}

  /** A node a fault targets: always shown. */
  target(node: string): void {
    this.admit(this.series(node), true);
  }

  /** A reading of `source` (a guard, a step, an observer) with its value, whatever the probe. */
  reading(source: string, rank: SourceRank, at: number, value: unknown): void {
    const { facts, listed } = factsOf(value, this.listedBy.get(source));
    if (listed) this.listedBy.set(source, listed);
    const when = iso(at);
    const stamp = { iso: when, ms: Date.parse(when) };
    for (const f of facts) {
      // a better-informed source, once it spoke of a node, is the only one heard on it
      const ranks = this.rank[f.kind];
      if ((ranks.get(f.node) ?? 0) > rank) continue;
      ranks.set(f.node, rank);
      const s = this.series(f.node);
      const hurt = f.apply(s, stamp, this.renewals);
      if (!this.admitted.has(s.node) && (hurt || this.quiet < MAX_QUIET) && this.admit(s, false) && !hurt) this.quiet++;
      if (!this.admitted.has(s.node) && s.lease.length > 2) s.lease.splice(1, s.lease.length - 2);
    }
  }

  private series(node: string): NodeSeries {
    let s = this.all.get(node);
    if (!s) {
      s = { node, lease: [], ready: [], taints: [], deleted: [] };
      this.all.set(node, s);
    }
    return s;
  }

  /** Shows a node (a fault's target whatever the count); false when it is left out. */
  private admit(s: NodeSeries, target: boolean): boolean {
    if (this.admitted.has(s.node)) return true;
    if (!target && this.report.nodes.length >= MAX_SHOWN) {
      if (!this.leftOut.has(s.node)) this.report.nodesLeftOut = this.leftOut.add(s.node).size;
      return false;
    }
    if (this.leftOut.delete(s.node)) this.report.nodesLeftOut = this.leftOut.size;
    this.admitted.add(s.node);
    this.report.nodes.push(s);
    return true;
  }
}
