import type { NodeFact, NodeFactKind, ReadingFacts } from '../contract/node-facts.js';

/**
 * Per-node history a report keeps for the timeline's node lanes: Lease age, the Ready condition, NoExecute taints
 * and pods deleted, from the node facts the probes of readings (guards, expect steps, observers) declare
 * (`meta.nodeFacts`). Changes only, each list capped.
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

/**
 * When each node's last Lease sample says it was renewed (ms; null: no Lease), kept beside the series so that telling
 * a renewal from the same one seen again does not parse the sample's time: a node-leases reading speaks of every
 * node, and in a storm of renewals there are several readings a second.
 */
type Renewals = Map<string, number | null>;

const iso = (at: number) => new Date(at).toISOString();

/** Appends a change, or counts it as dropped past the cap. */
function push<T>(s: NodeSeries, list: T[], entry: T): void {
  if (list.length < MAX_CHANGES) list.push(entry);
  else s.dropped = (s.dropped ?? 0) + 1;
}

/** A Lease sample kept at a renewal or a change of staleness; whether the node is hurt (stale). */
function applyLease(s: NodeSeries, ageMs: number | null, stale: boolean, at: Stamp, renewals: Renewals): boolean {
  const last = s.lease.at(-1);
  const renewal = ageMs === null ? null : at.ms - ageMs;
  const before = renewals.get(s.node);
  const renewed = last !== undefined && renewal !== null && last.ageMs !== null && Math.abs((before ?? 0) - renewal) > 1;
  if (last && last.stale === stale && (last.ageMs === null) === (ageMs === null) && !renewed) return stale;
  renewals.set(s.node, renewal);
  s.lease.push({ at: at.iso, ageMs, stale });
  if (s.lease.length > MAX_LEASE) thin(s);
  return stale;
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

/** A fact the series keeps (the lanes draw no predicted eviction), as a change; whether the node is hurt by it. */
function apply(s: NodeSeries, f: Exclude<NodeFact, { kind: 'eviction' }>, at: Stamp, renewals: Renewals): boolean {
  switch (f.kind) {
    case 'lease':
      return applyLease(s, f.ageMs, f.stale, at, renewals);
    case 'ready':
      if (s.ready.at(-1)?.status !== f.status) push(s, s.ready, { at: at.iso, status: f.status });
      return f.status !== 'True';
    case 'taints': {
      const last = s.taints.at(-1);
      if (last ? last.keys.join(',') !== f.keys.join(',') : f.keys.length > 0) push(s, s.taints, { at: at.iso, keys: [...f.keys] });
      return f.keys.length > 0;
    }
    case 'deleted':
      if (!s.deleted.some((d) => d.pod === f.pod && Math.abs(Date.parse(d.at) - f.at) < 5_000))
        push(s, s.deleted, { at: iso(f.at), pod: f.pod, cause: f.cause });
      return true;
  }
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
  /** The kinds of fact the readings' probes give (`report.nodeFacts`). */
  private readonly kinds = new Set<NodeFactKind>();
  private quiet = 0;

  /** `report.nodes` is filled in place. */
  constructor(private readonly report: { nodes: NodeSeries[]; nodesLeftOut?: number; nodeFacts?: NodeFactKind[] }) {}

  /** A node a fault targets: always shown. */
  target(node: string): void {
    this.admit(this.series(node), true);
  }

  /**
   * A reading of `source` (a guard, a step, an observer) with the node facts its probe declares of it; one without
   * (its probe declares none, or it had no value) tells nothing of nodes.
   */
  reading(source: string, rank: SourceRank, at: number, declared: ReadingFacts | undefined): void {
    if (!declared) return;
    for (const k of declared.kinds) if (!this.kinds.has(k)) this.report.nodeFacts = [...this.kinds.add(k)].sort();
    const when = iso(at);
    const stamp = { iso: when, ms: Date.parse(when) };
    for (const f of this.untainted(source, declared)) {
      if (f.kind === 'eviction') continue;
      // a better-informed source, once it spoke of a node, is the only one heard on it
      const ranks = this.rank[f.kind];
      if ((ranks.get(f.node) ?? 0) > rank) continue;
      ranks.set(f.node, rank);
      const s = this.series(f.node);
      const hurt = apply(s, f, stamp, this.renewals);
      if (!this.admitted.has(s.node) && (hurt || this.quiet < MAX_QUIET) && this.admit(s, false) && !hurt) this.quiet++;
      if (!this.admitted.has(s.node) && s.lease.length > 2) s.lease.splice(1, s.lease.length - 2);
    }
  }

  /**
   * The facts, and for a source that gives NoExecute taints, an empty one for each node it listed tainted last time and
   * no longer does: every reading of such a source lists every tainted node it watches.
   */
  private untainted(source: string, declared: ReadingFacts): readonly NodeFact[] {
    if (!declared.kinds.includes('taints')) return declared.facts;
    const listed = new Set<string>();
    for (const f of declared.facts) if (f.kind === 'taints') listed.add(f.node);
    const before = this.listedBy.get(source);
    this.listedBy.set(source, listed);
    const gone = [...(before ?? [])].filter((node) => !listed.has(node));
    return gone.length ? [...declared.facts, ...gone.map((node): NodeFact => ({ kind: 'taints', node, keys: [] }))] : declared.facts;
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
