import { NEVER, type NodeRow, type PodForecast, type PodGroup } from './model.js';
import type { SlimTaint } from '../kube/resources.js';
import type { TolerationTimes, WorkingRow } from './store.js';

/*
 * The taint manager (the taint-eviction controller since 1.29): a pod on a node with NoExecute taints is deleted
 * when its toleration of them runs out, counted from when the taint manager first saw the taint (a new leader's
 * from its own start). Master disruption mode removes the taints, and with them the evictions to come, except a
 * taint added in the very pass that entered it.
 */

/** What becomes of pods with a toleration time on a node. */
export type Outcome = 'frozen' | 'untainted' | 'tolerated' | 'kept' | 'stopped' | 'evicted';

/** When master disruption mode may start: from `early` at the soonest to `late` at the latest (NEVER: it surely does not). */
export interface MasterWindow {
  early: number;
  late: number;
  /** A taint added from this moment on may be added in the pass that enters the mode, and stay. */
  sticksFrom: number;
}

/** When the taint manager starts counting a toleration: the taint's moment, or the leader's start if later. */
const countsFrom = (taintAt: number, leaderSince: number) => Math.max(taintAt, leaderSince);

/**
 * What becomes of pods tolerating the node's taints for `tol` ms, their taint coming at `taintAt` (NaN: none). For the
 * bound a taint that may come in the pass entering master disruption mode may stay; for the likely moment it does not.
 */
export function outcomeOf(
  taintAt: number,
  keepsTaint: boolean,
  tol: number,
  master: MasterWindow,
  frozen: boolean,
  leaderSince: number,
  likely = false,
): Outcome {
  if (frozen) return 'frozen';
  if (Number.isNaN(taintAt)) return 'untainted';
  if (tol === NEVER) return 'tolerated';
  if (keepsTaint) return 'kept';
  const at = countsFrom(taintAt, leaderSince) + tol;
  // evicted before the taint is removed on entering master disruption mode, or the taint may stay
  return at < master.late || (!likely && taintAt >= master.sticksFrom) ? 'evicted' : 'stopped';
}

/** When pods with this outcome and toleration time are evicted; NEVER when not. */
export function evictsAt(o: Outcome, taintAt: number, tol: number, leaderSince: number): number {
  return o === 'kept' || o === 'evicted' ? countsFrom(taintAt, leaderSince) + tol : NEVER;
}

function why(o: Outcome, node: NodeRow, tol: number, frozenBecause: string): string {
  switch (o) {
    case 'frozen':
      return frozenBecause;
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

/** A pod kept: `at` is its eviction time, NEVER when none is predicted. */
interface Kept {
  key: string;
  at: number;
  likely: number;
  node: NodeRow;
  tol: number;
  outcome: Outcome;
}

/**
 * The first `n` pods by eviction time (none last, or left out with `evictedOnly`), then key: all of them sorted, or
 * when n is small a running selection, so that a forecast over 150,000 pods on failing nodes makes the few
 * PodForecasts it reports, not one per pod. A group's keys are sorted, so once one of them is not kept, neither are
 * the rest.
 */
export class FirstPods {
  private readonly kept: Kept[] = [];

  constructor(
    private readonly n: number,
    private readonly evictedOnly = false,
    private readonly frozenBecause = '',
  ) {}

  /** Whether a pod `key`, evicted at `at`, would be kept: when not, no pod evicted then with a later key or later is. */
  keeps(key: string, at: number): boolean {
    if (this.evictedOnly && at === NEVER) return false;
    if (this.kept.length < this.n) return true;
    if (this.n === 0) return false;
    const last = this.kept[this.n - 1]!;
    return at < last.at || (at === last.at && key < last.key);
  }

  /** The pods `keys` (sorted), evicted at `at` (NEVER: not), likely at `likely`. */
  offer(keys: readonly string[], at: number, likely: number, node: NodeRow, tol: number, outcome: Outcome): void {
    const kept = this.kept;
    if (this.evictedOnly && at === NEVER) return;
    if (!Number.isFinite(this.n)) {
      for (const key of keys) kept.push({ key, at, likely, node, tol, outcome });
      return;
    }
    for (const key of keys) {
      if (kept.length === this.n && (this.n === 0 || !before(key, at, kept[this.n - 1]!))) return;
      let i = kept.length;
      while (i > 0 && before(key, at, kept[i - 1]!)) i--;
      kept.splice(i, 0, { key, at, likely, node, tol, outcome });
      if (kept.length > this.n) kept.pop();
    }
  }

  sorted(): PodForecast[] {
    if (!Number.isFinite(this.n)) this.kept.sort((a, b) => (before(a.key, a.at, b) ? -1 : before(b.key, b.at, a) ? 1 : 0));
    return this.kept.map(({ key, at, likely, node, tol, outcome }) => {
      const p: PodForecast = { key, node: node.node.name, why: why(outcome, node, tol, this.frozenBecause) };
      if (at !== NEVER) p.evictAt = at;
      if (at !== NEVER && likely !== NEVER) p.evictLikely = likely;
      return p;
    });
  }
}

/** Whether a pod evicted at `at` (NEVER: not evicted) comes before a kept one: by eviction time, then key. */
const before = (key: string, at: number, other: Kept) => at < other.at || (at === other.at && key < other.key);

/**
 * The row's pods by toleration time of `taints` (its PodTimes), worked out again only when its groups or the taints
 * are not the arrays they were worked out from: a failing node then costs a judgement its row, not a visit to each
 * group and keys.
 */
export function podTimesOf(row: WorkingRow, taints: readonly SlimTaint[], groups: readonly PodGroup[], tolerated: TolerationTimes): void {
  if (row.timesOf === groups && row.timesFor === taints) return;
  const tols = groups.map((g) => tolerated.of(taints, g.tolerations));
  const order = tols.map((_, i) => i).sort((a, b) => tols[a]! - tols[b]! || a - b);
  const times: number[] = [];
  let sum = 0;
  let firstKey: string | undefined;
  row.podsForAWhile = 0;
  row.longest = NEVER;
  for (const i of order) {
    const keys = groups[i]!.keys;
    const tol = tols[i]!;
    times.push(tol, (sum += keys.length));
    if (tol === tols[order[0]!] && (firstKey === undefined || keys[0]! < firstKey)) firstKey = keys[0];
    if (tol !== NEVER) {
      row.podsForAWhile = sum;
      row.longest = tol;
    }
  }
  row.timesOf = groups;
  row.timesFor = taints;
  row.times = times;
  row.podCount = sum;
  row.shortest = times[0] ?? NEVER;
  row.firstKey = firstKey ?? '';
}
