/*
 * The eviction forecast's tools for its taint queue (forecast.ts): ordering by moment, counting in sorted moments,
 * the running maximum of taints ahead.
 */

import type { ForecastScratch } from './scratch.js';

const NEVER = Infinity;

/**
 * The places 0..n-1 of `keys` in ascending order of key, equal keys in order of place (a stable sort): the keys sorted
 * natively and each one's place found by a binary search, which at thousands of keys costs a fraction of a sort that
 * calls back for every comparison. The order is in `scratch`'s memory.
 */
export function ascending(keys: Float64Array, scratch: ForecastScratch): Int32Array {
  const sorted = scratch.float64('sorted', keys.length);
  sorted.set(keys);
  sorted.sort();
  // how many keys equal to the one first at each place have been placed
  const placed = scratch.int32('placed', keys.length).fill(0);
  const order = scratch.int32('order', keys.length);
  for (let k = 0; k < keys.length; k++) {
    const first = countBelow(sorted, keys[k]!);
    order[first + placed[first]!++] = k;
  }
  return order;
}

/** How many of the sorted `xs` are below t. */
function countBelow(xs: ArrayLike<number>, t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How many of the sorted `xs` are at most t. */
export function countAtMost(xs: ArrayLike<number>, t: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first of the sorted `ts` after `from`. */
export const firstAfter = (ts: ArrayLike<number>, from: number): number | undefined => ts[countAtMost(ts, from)];

/** The fewest NotReady nodes that make a zone of `size` partially disrupted (more than 2, and the threshold). */
export function firstPartialCount(size: number, threshold: number): number {
  let k = Math.max(3, Math.ceil(threshold * size));
  while (k > 3 && (k - 1) / size >= threshold) k--;
  while (k / size < threshold) k++;
  return k;
}

/** Entries (late, next) taken in order of `late`: the largest `next` of those whose `late` is before a moment. */
export class SortedByLate {
  private readonly lates: Float64Array;
  private readonly nexts: Float64Array;
  private size = 0;
  private taken = 0;
  private best = -NEVER;

  /** At most `capacity` entries are added; they are kept in `scratch`'s memory. */
  constructor(capacity: number, scratch: ForecastScratch) {
    this.lates = scratch.float64('lates', capacity);
    this.nexts = scratch.float64('nexts', capacity);
  }

  add(late: number, next: number): void {
    if (this.taken > 0 && late < this.lates[this.taken - 1]!) {
      // before what was already taken: it counts from now on
      this.best = Math.max(this.best, next);
      return;
    }
    // nodes come in the order they become eligible, so mostly after the others
    let i = this.size;
    while (i > this.taken && this.lates[i - 1]! > late) i--;
    if (i < this.size) {
      this.lates.copyWithin(i + 1, i, this.size);
      this.nexts.copyWithin(i + 1, i, this.size);
    }
    this.lates[i] = late;
    this.nexts[i] = next;
    this.size++;
  }

  /** The largest `next` of the entries whose `late` < t; t never decreases from one call to the next. */
  latestNextBefore(t: number): number {
    while (this.taken < this.size && this.lates[this.taken]! < t) this.best = Math.max(this.best, this.nexts[this.taken++]!);
    return this.best;
  }
}
