import type { PodColumns, PodGroup } from './model.js';
import type { SlimPod, SlimToleration } from '../kube/resources.js';

/*
 * The pods' part of the forecast's feed (forecast-feed.ts): per node its pods grouped by tolerations array, kept by the
 * pods watch, and the same groups as numbers in columns by the node's slot, so that a judgement over thousands of
 * failing nodes reads a few arrays side by side rather than each node's map, list and groups.
 */

/**
 * Groups a slot's columns hold. Each group is the pods of a node sharing one tolerations array: a workload's pods do,
 * and most pods carry the defaults. A node with more groups is read from its map.
 */
const PER_NODE = 4;
/** In a slot's first entry: more groups than fit. */
const MORE = -1;

interface Group extends PodGroup {
  keys: string[];
  /** Its tolerations' number (TolerationIds). */
  id: number;
}

/** A node's pods that count, by tolerations array; the list of those groups once asked for; its slot, -1 while no Node. */
interface NodePods {
  by: Map<SlimToleration[], Group>;
  list?: PodGroup[];
  slot: number;
}

/** Numbers for the tolerations arrays pods carry, each kept while a group has it and then given again. */
class TolerationIds {
  readonly arrays: (SlimToleration[] | undefined)[] = [];
  private readonly ids = new Map<SlimToleration[], number>();
  private readonly groups: number[] = [];
  private readonly free: number[] = [];

  take(t: SlimToleration[]): number {
    let id = this.ids.get(t);
    if (id === undefined) {
      id = this.free.pop() ?? this.arrays.length;
      this.ids.set(t, id);
      this.arrays[id] = t;
      this.groups[id] = 0;
    }
    this.groups[id]!++;
    return id;
  }

  drop(id: number): void {
    if (--this.groups[id]! > 0) return;
    this.ids.delete(this.arrays[id]!);
    this.arrays[id] = undefined;
    this.free.push(id);
  }
}

/** Columns that grow by doubling, and keep what they hold as they do (the feed's node columns grow the same way). */
export const wider = <T extends Float64Array | Int32Array | Uint8Array>(a: T, capacity: number, make: (n: number) => T): T => {
  const b = make(capacity);
  b.set(a);
  return b;
};
const int32 = (n: number) => new Int32Array(n);

/** The failing nodes' pods as the feed hands them (PodColumns), filled again for each judgement. */
class FailingPods implements PodColumns {
  start = new Int32Array(65);
  size = new Int32Array(64);
  tolerationsId = new Int32Array(64);
  readonly first: string[] = [];
  /** Per group, its node's slot. */
  slot = new Int32Array(64);
  private nodes = 0;

  constructor(private readonly from: FeedPods) {}

  get tolerations(): readonly (readonly SlimToleration[] | undefined)[] {
    return this.from.ids.arrays;
  }

  keys = (group: number): readonly string[] => this.from.groupAt(this.slot[group]!, this.tolerationsId[group]!);

  clear(): void {
    this.nodes = 0;
  }

  /** Ends a fill, letting go of the keys held beyond its groups. */
  end(): void {
    this.first.length = this.start[this.nodes]!;
  }

  /** The next node's groups: those of slot `k`, or none (-1). */
  push(k: number): void {
    let g = this.start[this.nodes]!;
    if (k >= 0) g = this.from.groupsOf(k, this, g);
    if (this.nodes + 2 > this.start.length) this.start = wider(this.start, 2 * this.start.length, int32);
    this.start[++this.nodes] = g;
  }

  /** Group `g` (making room for it): `size` pods of tolerations `id` on slot `k`, the first by key `first`. */
  set(g: number, k: number, id: number, size: number, first: string): void {
    if (g >= this.size.length) {
      const capacity = 2 * this.size.length;
      [this.size, this.tolerationsId, this.slot] = [wider(this.size, capacity, int32), wider(this.tolerationsId, capacity, int32), wider(this.slot, capacity, int32)];
    }
    this.size[g] = size;
    this.tolerationsId[g] = id;
    this.slot[g] = k;
    this.first[g] = first;
  }
}

/** Per node its pods by tolerations, and in columns by the slots the feed gives nodes (slotOf). */
export class FeedPods {
  readonly ids = new TolerationIds();
  /** The columns of the last failing nodes handed out (fill them with clear() and push()). */
  readonly failing = new FailingPods(this);
  private readonly byNode = new Map<string, NodePods>();
  private readonly atSlot: (NodePods | undefined)[] = [];
  /**
   * Per slot, PER_NODE entries: a group's tolerations' number + 1 (0: none after), its size and its first key; MORE
   * first: see the map.
   */
  private id = new Int32Array(0);
  private size = new Int32Array(0);
  private readonly first: (string | undefined)[] = [];

  constructor(
    /** Only pods in these namespaces count, when given. */
    private readonly namespaces: ReadonlySet<string> | undefined,
    private readonly slotOf: (node: string) => number | undefined,
  ) {}

  /** Whether a pod counts: bound to a node, not being deleted, in `namespaces` when given. */
  private counts(p: SlimPod | undefined): p is SlimPod & { nodeName: string } {
    return p?.nodeName !== undefined && p.deletionTimestamp === undefined && (!this.namespaces || this.namespaces.has(p.namespace));
  }

  /** A node's groups of pods as a list, made when first asked for after a group comes or goes. */
  list(node: string): readonly PodGroup[] {
    const on = this.byNode.get(node);
    return on ? (on.list ??= Array.from(on.by.values(), ({ node, tolerations, keys }) => ({ node, tolerations, keys }))) : [];
  }

  /** Node `name` has slot `k` from now on (its Node came). */
  attach(name: string, k: number): void {
    if (k * PER_NODE >= this.id.length) [this.id, this.size] = [wider(this.id, 2 * (k + 32) * PER_NODE, int32), wider(this.size, 2 * (k + 32) * PER_NODE, int32)];
    const on = this.byNode.get(name);
    if (on) on.slot = k;
    this.atSlot[k] = on;
    this.write(k);
  }

  /** Slot `k` is no node's any more (its Node went). */
  detach(k: number): void {
    const on = this.atSlot[k];
    if (on) on.slot = -1;
    this.atSlot[k] = undefined;
    this.write(k);
  }

  /** A pod's change: as it is now (`p`, undefined when gone) and as it was (`before`). */
  change(key: string, p: SlimPod | undefined, before: SlimPod | undefined): void {
    const was = this.counts(before);
    const is = this.counts(p);
    // most changes are a pod's status: it stays in its group
    if (was && is && before.nodeName === p.nodeName && before.tolerations === p.tolerations) return;
    if (was) this.remove(key, before);
    if (is) this.add(key, p);
  }

  /** Writes slot k's groups into `out` from group `g` on; returns the group after the last. */
  groupsOf(k: number, out: FailingPods, g: number): number {
    const base = k * PER_NODE;
    if (this.id[base] === MORE) {
      for (const group of this.atSlot[k]!.by.values()) out.set(g++, k, group.id, group.keys.length, group.keys[0]!);
      return g;
    }
    for (let e = base; e < base + PER_NODE && this.id[e] !== 0; e++) out.set(g++, k, this.id[e]! - 1, this.size[e]!, this.first[e]!);
    return g;
  }

  /** The keys of the group of tolerations `id` on slot `k`. */
  groupAt(k: number, id: number): readonly string[] {
    return this.atSlot[k]?.by.get(this.ids.arrays[id]!)?.keys ?? [];
  }

  private add(key: string, p: SlimPod & { nodeName: string }): void {
    let on = this.byNode.get(p.nodeName);
    if (!on) {
      const k = this.slotOf(p.nodeName) ?? -1;
      this.byNode.set(p.nodeName, (on = { by: new Map(), slot: k }));
      if (k >= 0) this.atSlot[k] = on;
    }
    const g = on.by.get(p.tolerations);
    if (g) {
      const i = sortedIndex(g.keys, key);
      if (g.keys[i] === key) return;
      g.keys.splice(i, 0, key);
    } else {
      on.by.set(p.tolerations, { node: p.nodeName, tolerations: p.tolerations, keys: [key], id: this.ids.take(p.tolerations) });
      on.list = undefined;
    }
    if (on.slot >= 0) this.write(on.slot);
  }

  private remove(key: string, p: SlimPod & { nodeName: string }): void {
    const on = this.byNode.get(p.nodeName);
    const g = on?.by.get(p.tolerations);
    if (!on || !g) return;
    const i = sortedIndex(g.keys, key);
    if (g.keys[i] !== key) return;
    g.keys.splice(i, 1);
    if (g.keys.length === 0) {
      on.by.delete(p.tolerations);
      this.ids.drop(g.id);
      on.list = undefined;
      if (on.by.size === 0) {
        this.byNode.delete(p.nodeName);
        if (on.slot >= 0) this.atSlot[on.slot] = undefined;
      }
    }
    if (on.slot >= 0) this.write(on.slot);
  }

  /** Slot k's columns from its node's map. */
  private write(k: number): void {
    const on = this.atSlot[k];
    const base = k * PER_NODE;
    if (on && on.by.size > PER_NODE) {
      this.id[base] = MORE;
      return;
    }
    let e = base;
    if (on)
      for (const g of on.by.values()) {
        this.id[e] = g.id + 1;
        this.size[e] = g.keys.length;
        this.first[e++] = g.keys[0];
      }
    for (; e < base + PER_NODE; e++) {
      this.id[e] = 0;
      this.first[e] = undefined;
    }
  }
}

/** Where `key` is or goes in the sorted `keys` (code-unit order). */
function sortedIndex(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
