import { type LifecycleSettings, NEVER, type NodeRow, type ZoneState } from './model.js';

/*
 * Zones, as the controller's handleDisruption sees them after each pass: a zone's state from how many of its nodes
 * are NotReady (ComputeZoneState), the tainting rate that state gives (setLimiterInZone), and master disruption mode
 * when every zone has no Ready node. The forecast knows a node's NotReady moment only within a window (the pass it
 * falls in), so a zone's count at a moment is a range, and the rate taken is the highest the range allows: a taint
 * can then only be predicted early, never late.
 */

/** ComputeZoneState: full with no Ready node, partial with more than 2 NotReady at the threshold or above. */
export function zoneStateOf(notReady: number, size: number, threshold: number): ZoneState {
  const ready = size - notReady;
  if (ready === 0 && notReady > 0) return 'FullDisruption';
  if (notReady > 2 && notReady / size >= threshold) return 'PartialDisruption';
  return 'Normal';
}

/** setLimiterInZone: the tainting rate (nodes per second) of a zone of `size` nodes in `state`. */
function rateOf(state: ZoneState, size: number, s: LifecycleSettings): number {
  if (state !== 'PartialDisruption') return s.nodeEvictionRate;
  return size > s.largeClusterSizeThreshold ? s.secondaryNodeEvictionRate : 0;
}

/** How many of the sorted `xs` are at most t, that count known to lie from lo to hi. */
function countAtMost(xs: ArrayLike<number>, t: number, lo = 0, hi = xs.length): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Moments in ascending order, counted at moments asked mostly in ascending order too: the taint queue walks forward
 * in time node by node. Each count is searched from the one before, a few places away, by steps doubling (an
 * exponential search), rather than over thousands of nodes' moments each time.
 */
class SortedMoments {
  /** The count last answered: where the next search starts. */
  private from = 0;

  constructor(readonly moments: Float64Array) {}

  /** The last moment; NEVER when there is none. */
  get last(): number {
    return this.moments[this.moments.length - 1] ?? NEVER;
  }

  /** How many are at most t. */
  countAtMost(t: number): number {
    const xs = this.moments;
    // the count lies from lo to hi
    let lo: number;
    let hi: number;
    let step = 1;
    if (this.from === 0 || xs[this.from - 1]! <= t) {
      // at `from` or after it
      lo = this.from;
      while (lo + step <= xs.length && xs[lo + step - 1]! <= t) {
        lo += step;
        step *= 2;
      }
      hi = Math.min(lo + step, xs.length);
    } else {
      // before `from`
      hi = this.from - 1;
      while (hi - step >= 0 && xs[hi - step]! > t) {
        hi -= step;
        step *= 2;
      }
      lo = Math.max(hi - step, 0);
    }
    this.from = countAtMost(xs, t, lo, hi);
    return this.from;
  }
}

export class Zone {
  size = 0;
  notReadyNow = 0;
  /** When each counted node goes down at the earliest and at the latest, sorted. */
  private early = new SortedMoments(new Float64Array(0));
  private late = new SortedMoments(new Float64Array(0));
  /** `late`, each moment when the zone's state has surely taken the node as down. */
  private stated = new SortedMoments(new Float64Array(0));
  private changes?: Float64Array;
  private taintableFrom?: number[];
  private partialFrom?: number;

  constructor(
    readonly name: string,
    private readonly s: LifecycleSettings,
    /** Every node of the zone, excluded ones too: the ones its queue taints. */
    readonly members: readonly NodeRow[] = [],
    /** Its nodes counted in its state (not excluded from disruption checks). */
    readonly rows: readonly NodeRow[] = [],
  ) {}

  /** Called once every node is in: the zone's size with `healthy` nodes more. */
  close(healthy: number): void {
    const n = this.rows.length;
    this.size = n + healthy;
    // typed arrays sort numbers natively: thousands of nodes down at once are sorted at every judgement
    const early = new Float64Array(n);
    const late = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const r = this.rows[i]!;
      if (r.notReady) this.notReadyNow++;
      early[i] = r.downEarly;
      late[i] = r.downLate;
    }
    this.early = new SortedMoments(early.sort());
    this.late = new SortedMoments(late.sort());
    // the zone's state (its rate) follows a node down only at the end of the pass that marked it (handleDisruption,
    // after the workers; the tainting loop runs meanwhile), up to a second after its transition as stored, to the second
    const lag = 1000 + this.s.nodeMonitorPeriodMs;
    this.stated = new SortedMoments(late.map((t) => t + lag));
  }

  get stateNow(): ZoneState {
    return zoneStateOf(this.notReadyNow, this.size, this.s.unhealthyZoneThreshold);
  }

  /** The moment every node of the zone may be down at the soonest; NEVER while one stays Ready. */
  get possiblyAllDownAt(): number {
    return this.size > this.rows.length || this.size === 0 ? NEVER : this.early.last;
  }

  /** The moment every node of the zone is surely down; NEVER while one may stay Ready. */
  get surelyAllDownAt(): number {
    return this.size > this.rows.length || this.size === 0 ? NEVER : this.late.last;
  }

  /** The highest tainting rate the zone can have at t: the states of every NotReady count possible then. */
  fastestRateAt(t: number): number {
    return this.fastestRateOf(this.stated.countAtMost(t), this.early.countAtMost(t));
  }

  /**
   * The highest tainting rate the zone can have at any moment from a to b: the counts only grow, so every count
   * possible then lies between the fewest surely down at a and the most possibly down at b.
   */
  fastestRateBetween(a: number, b: number): number {
    return this.fastestRateOf(this.stated.countAtMost(a), this.early.countAtMost(b));
  }

  /** The lowest tainting rate the zone can have at t. */
  slowestRateAt(t: number): number {
    const lo = this.stated.countAtMost(t);
    const hi = this.early.countAtMost(t);
    let slowest = Math.min(this.rateOfCount(lo), this.rateOfCount(hi));
    if (this.partialBetween(lo, hi)) slowest = Math.min(slowest, rateOf('PartialDisruption', this.size, this.s));
    return slowest;
  }

  /** The highest rate of the states a NotReady count from lo to hi gives. */
  private fastestRateOf(lo: number, hi: number): number {
    let fastest = Math.max(this.rateOfCount(lo), this.rateOfCount(hi));
    // a count in between can be partially disrupted where neither end is
    if (this.partialBetween(lo, hi)) fastest = Math.max(fastest, rateOf('PartialDisruption', this.size, this.s));
    return fastest;
  }

  private rateOfCount(notReady: number): number {
    return rateOf(zoneStateOf(notReady, this.size, this.s.unhealthyZoneThreshold), this.size, this.s);
  }

  /** Whether a count from lo to hi can make the zone partially disrupted. */
  private partialBetween(lo: number, hi: number): boolean {
    this.partialFrom ??= firstPartialCount(this.size, this.s.unhealthyZoneThreshold);
    return Math.max(lo, this.partialFrom) <= Math.min(hi, this.size - 1);
  }

  /**
   * The moments its rate can change: as a count changes, at a node's earliest or latest moment down. `early` and
   * `late` are sorted already, so the two are merged, not sorted again: thousands of nodes down at once give
   * thousands of moments at every judgement.
   */
  private changeMoments(): ArrayLike<number> {
    return (this.changes ??= mergeFinite(this.early.moments, this.stated.moments));
  }

  /** The first moment from t on at which the zone may taint (its rate may be above 0); NEVER when it never will. */
  firstTaintableFrom(t: number): number {
    if (this.fastestRateAt(t) > 0) return t;
    const changes = this.changeMoments();
    let k = countAtMost(changes, t);
    // from a change on, the first change at which it may taint (worked out once per change)
    const first = (this.taintableFrom ??= []);
    const from = k;
    while (k < changes.length && first[k] === undefined && this.fastestRateAt(changes[k]!) <= 0) k++;
    const found = k < changes.length ? (first[k] ?? changes[k]!) : NEVER;
    for (let j = from; j < k; j++) first[j] = found;
    return found;
  }
}
/** The finite moments of the ascending `a` and `b` together, ascending, each once. */
function mergeFinite(a: Float64Array, b: Float64Array): Float64Array {
  const out = new Float64Array(a.length + b.length);
  let size = 0;
  let i = 0;
  let k = 0;
  while (i < a.length || k < b.length) {
    const next = k === b.length || (i < a.length && a[i]! <= b[k]!) ? a[i++]! : b[k++]!;
    if (Number.isFinite(next) && (size === 0 || out[size - 1] !== next)) out[size++] = next;
  }
  return out.subarray(0, size);
}

/** The fewest NotReady nodes that make a zone of `size` partially disrupted (more than 2, and the threshold). */
function firstPartialCount(size: number, threshold: number): number {
  let k = Math.max(3, Math.ceil(threshold * size));
  while (k > 3 && (k - 1) / size >= threshold) k--;
  while (k / size < threshold) k++;
  return k;
}
