/**
 * The pods' part of the eviction forecast (forecast.ts): what becomes of a node's pods with a given toleration time,
 * and the first pods by eviction time, kept without making one object per pod.
 */

const NEVER = Infinity;

/** What the pods' verdicts read of a failing node's forecast (a NodeForecast). */
export interface FailingNode {
  name: string;
  /** When its NoExecute taint was added or can be at the earliest; absent when it will not be. */
  taintAt?: number;
  /** Why no taint is coming although the node is failing. */
  held?: string;
  /** Tainted although every zone is down: the controller keeps this taint. */
  keepsTaint?: boolean;
}

/** A pod's prediction, as forecast.ts reports it. */
export interface PodForecast {
  key: string;
  node: string;
  /** Earliest eviction; absent: not predicted (tolerated forever, node not failing, or evictions stopped). */
  evictAt?: number;
  why: string;
}

/** What becomes of pods with a toleration time (ms, from tolerationMs) on a node. */
export type Outcome = 'frozen' | 'untainted' | 'tolerated' | 'kept' | 'stopped' | 'evicted';

/** Pods with toleration time `tol` on a node whose NoExecute taint came or comes at `taintAt` (NaN: it will not), kept or not (`keepsTaint`) although every zone is down. */
export function outcomeOf(taintAt: number, keepsTaint: boolean, tol: number, cutoff: number, frozen: boolean): Outcome {
  if (frozen) return 'frozen';
  if (Number.isNaN(taintAt)) return 'untainted';
  if (tol === NEVER) return 'tolerated';
  if (keepsTaint) return 'kept';
  return taintAt + tol >= cutoff ? 'stopped' : 'evicted';
}

/** When pods with this outcome and toleration time are evicted: the taint's moment and the toleration; NEVER when not. */
export function evictsAt(o: Outcome, taintAt: number, tol: number): number {
  return o === 'kept' || o === 'evicted' ? taintAt + tol : NEVER;
}

function why(o: Outcome, node: FailingNode, tol: number): string {
  switch (o) {
    case 'frozen':
      return 'no kube-controller-manager is leading: evictions frozen';
    case 'untainted':
      return node.held ?? 'node not tainted';
    case 'tolerated':
      return 'tolerates the taint forever';
    case 'kept':
      return 'every zone is down, but the controller kept this taint (added as it entered master disruption mode)';
    case 'stopped':
      return 'all zones disrupted: evictions stopped';
    case 'evicted':
      return tol === 0 ? 'does not tolerate the taint' : `tolerates it for ${tol / 1000}s`;
  }
}

/** A pod kept: `at` is its eviction time, NEVER when none is predicted; `node` as the forecast numbers nodes. */
interface Kept {
  key: string;
  at: number;
  node: number;
  tol: number;
  outcome: Outcome;
}

/**
 * The first `n` pods by eviction time (none last, or left out with `evictedOnly`), then key: all of them sorted, or
 * when n is small a running selection, so that a forecast over 150,000 pods on failing nodes makes the few
 * PodForecasts it reports, not one per pod. Pods are offered by group, whose keys are asked for (`keysOf`) only when
 * its first pod comes before the last pod kept; a group's keys are sorted, so once one of them is not kept, neither
 * are the rest. Nodes are given by number, and asked for only for the pods kept.
 */
export class FirstPods {
  private readonly kept: Kept[] = [];

  constructor(
    private readonly n: number,
    private readonly keysOf: (group: number) => readonly string[],
    private readonly evictedOnly = false,
  ) {}

  /** The pods of `group`, the first by key `first`, evicted at `at` (NEVER: not). */
  offer(group: number, first: string, at: number, node: number, tol: number, outcome: Outcome): void {
    const kept = this.kept;
    if (this.evictedOnly && at === NEVER) return;
    if (!Number.isFinite(this.n)) {
      for (const key of this.keysOf(group)) kept.push({ key, at, node, tol, outcome });
      return;
    }
    // most groups come after the last one kept by their moment, or by their first key: decided without their keys
    if (kept.length === this.n && (this.n === 0 || !before(first, at, kept[this.n - 1]!))) return;
    for (const key of this.keysOf(group)) {
      if (kept.length === this.n && !before(key, at, kept[this.n - 1]!)) return;
      let i = kept.length;
      while (i > 0 && before(key, at, kept[i - 1]!)) i--;
      kept.splice(i, 0, { key, at, node, tol, outcome });
      if (kept.length > this.n) kept.pop();
    }
  }

  sorted(nodeAt: (node: number) => FailingNode): PodForecast[] {
    if (!Number.isFinite(this.n)) this.kept.sort((a, b) => (before(a.key, a.at, b) ? -1 : before(b.key, b.at, a) ? 1 : 0));
    return this.kept.map(({ key, at, node: i, tol, outcome }) => {
      const node = nodeAt(i);
      return at === NEVER ? { key, node: node.name, why: why(outcome, node, tol) } : { key, node: node.name, evictAt: at, why: why(outcome, node, tol) };
    });
  }
}

/** Whether a pod evicted at `at` (NEVER: not evicted) comes before a kept one: by eviction time, then key. */
const before = (key: string, at: number, other: Kept) => at < other.at || (at === other.at && key < other.key);
