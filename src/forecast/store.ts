import { byCodeUnit } from '../core/order.js';
import type { SlimTaint, SlimToleration } from '../kube/resources.js';
import { tolerationMs } from '../kube/tolerations.js';
import { type ForecastNode, NEVER, type NodeHealth, type NodeRow, type NodeTaints, type PodTimes, type QueueState } from './model.js';

/*
 * What one judgement keeps for the next, as an informer's store keeps objects between a controller's passes: each
 * node's row, the layout of the last array of nodes judged, and how long tolerations tolerate taints. The forecast's
 * feed owns one (feed.ts) and drops a node's row when the Node goes; a judgement without one starts from nothing and
 * ends the same. Nothing here is ever the forecast's input: the input is only read.
 */

type Writable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * A node's row as the store keeps it: rewritten by each judgement of the node, field by field (at thousands of failing
 * nodes, rows made anew at every judgement were most of what it allocated, and a time held in a field keeps its box
 * when rewritten). The judgement's modules read it as a NodeRow.
 */
export interface WorkingRow extends Writable<NodeHealth>, Writable<NodeTaints>, QueueState, Writable<PodTimes> {
  node: ForecastNode;
}

/** A judgement's nodes by name, their rows, and the rows by zone: what stays the same while its nodes do. */
export interface Layout {
  readonly rows: readonly WorkingRow[];
  /** Per zone every node (the ones its queue taints) and those counted in its state (not excluded). */
  readonly zones: ReadonlyMap<string, { readonly members: readonly NodeRow[]; readonly rows: readonly NodeRow[] }>;
}

/** Not the pods or taints of any node: a node's pods are worked out at its first judgement. */
const NONE: readonly never[] = Object.freeze([]);

export class ForecastStore {
  private readonly rows = new Map<string, WorkingRow>();
  private last?: { nodes: readonly ForecastNode[]; layout: Layout };
  /** How long pods tolerate taints, by the two arrays: kept while they are (interned, never changed in place). */
  readonly tolerated = new TolerationTimes();

  /** How many nodes it keeps a row for. */
  get size(): number {
    return this.rows.size;
  }

  /** Whether it keeps a row for the node named. */
  has(name: string): boolean {
    return this.rows.has(name);
  }

  /** The node named is gone: its row goes with it. */
  forget(name: string): void {
    if (this.rows.delete(name)) this.last = undefined;
  }

  /**
   * The layout of `given`, kept while the same array comes again (the feed hands the same array while no Node or
   * Lease changed, and an array of nodes is never changed in place): thousands of failing nodes are then judged without
   * laying them out again.
   */
  layoutOf(given: readonly ForecastNode[]): Layout {
    if (this.last?.nodes === given) return this.last.layout;
    const rows = byName(given).map((n) => this.rowOf(n));
    const zones = new Map<string, { members: NodeRow[]; rows: NodeRow[] }>();
    for (const r of rows) {
      let z = zones.get(r.node.zone);
      if (!z) zones.set(r.node.zone, (z = { members: [], rows: [] }));
      z.members.push(r);
      if (!r.node.excluded) z.rows.push(r);
    }
    const layout = { rows, zones };
    this.last = { nodes: given, layout };
    return layout;
  }

  /** The node's row, kept by name: a new ForecastNode of the same node (its Node changed) takes the row over. */
  private rowOf(node: ForecastNode): WorkingRow {
    const had = this.rows.get(node.name);
    if (had) {
      had.node = node;
      return had;
    }
    const row = blankRow(node);
    this.rows.set(node.name, row);
    return row;
  }
}

/** The nodes by name: as given when they are in that order already (the feed's), else sorted. */
function byName(nodes: readonly ForecastNode[]): readonly ForecastNode[] {
  for (let i = 1; i < nodes.length; i++)
    if (!(nodes[i - 1]!.name < nodes[i]!.name)) return [...nodes].sort((a, b) => byCodeUnit(a.name, b.name));
  return nodes;
}

/** A node's first row, every field in one literal: rows of one shape. */
function blankRow(node: ForecastNode): WorkingRow {
  return {
    node,
    // its health
    lastHeartbeat: NaN,
    silent: false,
    notReady: false,
    notReadyAt: NEVER,
    downEarly: NEVER,
    downLate: NEVER,
    queuedFrom: NEVER,
    queuedBy: NEVER,
    // its taints
    taintNow: undefined,
    taintedAt: NaN,
    taintComing: undefined,
    // its queue state
    taintAt: NaN,
    taintLikely: NaN,
    held: undefined,
    keepsTaint: false,
    // its pods, none worked out yet
    timesOf: NONE,
    timesFor: NONE,
    times: [],
    podCount: 0,
    podsForAWhile: 0,
    shortest: NEVER,
    longest: NEVER,
    firstKey: '',
  };
}

/**
 * How long pods tolerate a node's NoExecute taints (tolerationMs), worked out once per taints array and tolerations
 * array. Most nodes share one of two taints arrays and a workload's pods one tolerations array, so the last pair
 * asked for is answered without a lookup: hundreds of failing nodes ask the same question in a row. Weakly held: an
 * array no node or pod holds any more goes with its answers.
 */
export class TolerationTimes {
  private readonly byTaints = new WeakMap<readonly SlimTaint[], WeakMap<readonly SlimToleration[], number>>();
  private taints?: readonly SlimTaint[];
  private known = new WeakMap<readonly SlimToleration[], number>();
  private tolerations?: readonly SlimToleration[];
  private ms = 0;

  of(taints: readonly SlimTaint[], tolerations: readonly SlimToleration[]): number {
    if (taints !== this.taints) {
      this.taints = taints;
      this.tolerations = undefined;
      let known = this.byTaints.get(taints);
      if (!known) this.byTaints.set(taints, (known = new WeakMap()));
      this.known = known;
    }
    if (tolerations !== this.tolerations) {
      this.tolerations = tolerations;
      let ms = this.known.get(tolerations);
      if (ms === undefined) this.known.set(tolerations, (ms = tolerationMs(tolerations, taints)));
      this.ms = ms;
    }
    return this.ms;
  }
}
