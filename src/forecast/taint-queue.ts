import { lowerBound } from '../core/order.js';
import { NEVER, type NodeRow, type QueueState } from './model.js';
import type { Zone } from './zones.js';

/*
 * A zone's NoExecute tainter, as the controller runs it (RateLimitedTimedQueue): every 100 ms it hands the head of
 * the zone's queue a token from a token bucket of burst 1 refilled at the zone's rate, and taints that node.
 *
 * The order is not first in, first out. Since 1.21 every monitor pass removes each untainted NotReady node from its
 * zone's queue and adds it again (markNodeForTainting), in the order the pass's parallel workers reach the nodes, so
 * whichever node a worker re-adds first is next, whenever it went NotReady. What is sure is the count: the zone's
 * taints come one token apart for as long as its queue is not empty. So a node queued after k taints that surely came
 * before can be the next one, the (k+1)th: the earliest moment the zone can hand out its (k+1)th token is the bound a
 * guard reads. On 1.20 a node keeps the place it was first queued at; the same bound holds. The likely moment is the
 * node's place in the queue: first in, first out on 1.20, and on later releases the middle of the tokens it competes
 * for.
 */

/** The tainting loop's period (scheduler.NodeEvictionPeriod): a token is handed out up to this much after it refills. */
const TAINT_LOOP_MS = 100;

/**
 * How long before the forecast sees it a taint may have been written (the watch's delay, and the time from the read to
 * the reading): a node not seen tainted by now may have been tainted up to this much before, and its taint manager's
 * clock started then. Measured against the real controller, a taint seen 10 ms after its write made a forecast 10 ms
 * late; the bound stays ahead of a watch a second behind.
 */
export const UNSEEN_MS = 250;

const HELD_PARTIAL = 'zone partially disrupted: tainting stopped';
const HELD_MASTER = 'all zones disrupted: evictions stopped';

/** A row's queue state before its zone's queue is worked out: no taint coming, none held, none kept. */
export function unqueued(q: QueueState): void {
  q.taintAt = NaN;
  q.taintLikely = NaN;
  q.held = undefined;
  q.keepsTaint = false;
}

/**
 * Fills each member's queue state: taintAt (the bound), taintLikely and held. `cutoff`: the latest moment the controller may
 * enter master disruption mode (after it nothing is tainted again); NEVER when it surely does not.
 */
export function queueTaints(zone: Zone, o: { now: number; cutoff: number; requeues: boolean }): void {
  let lastTaint = -NEVER;
  for (const r of zone.members)
    if (r.taintNow) {
      r.taintAt = r.taintedAt;
      r.taintLikely = r.taintedAt;
      lastTaint = Math.max(lastTaint, r.taintNow.timeAdded ?? r.taintedAt);
    }
  // by the moment each can be queued; members come in name order, kept for the same moment
  const queued = inQueueOrder(zone.members);
  // not seen tainted by now: none of them is before the oldest write that could still be unseen
  const seen = o.now - UNSEEN_MS;
  const earliest = earliestTaints(zone, queued, lastTaint, seen);
  const latest = latestTaints(zone, queued, lastTaint, queued.length ? queued[queued.length - 1]!.queuedFrom : -NEVER);
  const runs = runsOf(earliest, queued);
  // sums[k]: the finite moments of the first k taints added up, for the middle of a range of them
  const sums = new Float64Array(earliest.length + 1);
  for (let k = 0; k < earliest.length; k++) sums[k + 1] = sums[k]! + (earliest[k] === NEVER ? 0 : earliest[k]!);
  for (let k = 0; k < queued.length; k++) {
    const r = queued[k]!;
    // the first of the zone's taints it can have: the one after those surely done before it was queued
    const first = lowerBound(latest, r.queuedFrom);
    const at = Math.max(r.queuedFrom, seen, earliest[first]!);
    if (at === NEVER || at > o.cutoff) {
      r.held = at === NEVER ? HELD_PARTIAL : HELD_MASTER;
      continue;
    }
    r.taintAt = at;
    // likely: its own place first in first out, or the middle of the tokens from its first to the end of its run
    let likely = earliest[k]!;
    if (o.requeues && likely !== NEVER) {
      let to = runs[k]!;
      while (to > k && earliest[to] === NEVER) to--;
      likely = (sums[to + 1]! - sums[first]!) / (to + 1 - first);
    }
    // (a taint not seen by now is likely still to come, whatever the bound allows for one unseen)
    if (likely <= o.cutoff && likely !== NEVER) r.taintLikely = Math.max(likely, at, o.now);
  }
}

/**
 * The untainted members that can be queued, by the moment each can be (a stable order: members come by name). The
 * moments are sorted natively and each member's place found by a binary search: at thousands of nodes that costs a
 * fraction of a sort calling back for every comparison.
 */
function inQueueOrder(members: readonly NodeRow[]): NodeRow[] {
  const waiting = members.filter((r) => !r.taintNow && r.queuedFrom !== NEVER);
  const moments = new Float64Array(waiting.length);
  for (let k = 0; k < waiting.length; k++) moments[k] = waiting[k]!.queuedFrom;
  moments.sort();
  // how many members with the moment first at each place have been placed there
  const placed = new Uint32Array(waiting.length);
  const ordered = new Array<NodeRow>(waiting.length);
  for (const r of waiting) {
    const first = lowerBound(moments, r.queuedFrom);
    ordered[first + placed[first]!++] = r;
  }
  return ordered;
}

/**
 * The earliest moment of each of the zone's next taints, in order: the nodes taken as queued as early as each can be,
 * the bucket refilled at the fastest rate the zone may have, from its last taint.
 */
function earliestTaints(zone: Zone, queued: readonly NodeRow[], lastTaint: number, now: number): Float64Array {
  const out = new Float64Array(queued.length);
  let previous = lastTaint;
  for (let k = 0; k < queued.length; k++) {
    const at = zone.firstTaintableFrom(Math.max(queued[k]!.queuedFrom, refilled(zone, previous), now));
    out[k] = at;
    if (at !== NEVER) previous = at;
  }
  return out;
}

/**
 * The earliest moment the zone's bucket has a token again after a taint at `previous`: refilled at the fastest rate
 * the zone may have until then (a zone changing state gets a new bucket, drained, which can only come later).
 */
function refilled(zone: Zone, previous: number): number {
  if (previous === -NEVER) return -NEVER;
  const rate = zone.fastestRateAt(previous);
  if (rate <= 0) return previous;
  const next = previous + 1000 / rate;
  return previous + 1000 / Math.max(rate, zone.fastestRateBetween(previous, next));
}

/**
 * The moment each of the zone's next taints has surely come by, in order, as long as that can be said: the nodes
 * taken as queued as late as each can be, and the bucket refilled at the slowest rate the zone may have (twice over:
 * a zone changing state gets a new bucket, drained). NEVER from the first that may never come. Worked out until
 * `until`, the last moment a node is queued at the earliest: later ones are sure to come after every node's bound.
 */
function latestTaints(zone: Zone, queued: readonly NodeRow[], lastTaint: number, until: number): Float64Array {
  const by = new Float64Array(queued.length);
  for (let i = 0; i < queued.length; i++) by[i] = queued[i]!.queuedBy;
  by.sort();
  // each moment is written over the moment its node is surely queued by, read just before
  let count = 0;
  let previous = lastTaint;
  for (const q of by) {
    // only the taints before the last node can be queued count for anyone
    if (previous >= until) break;
    const slowest = q === NEVER ? 0 : zone.slowestRateAt(Math.max(q, previous));
    const at = slowest > 0 ? Math.max(q, previous + 2000 / slowest) + TAINT_LOOP_MS : NEVER;
    by[count++] = at;
    if (at === NEVER) break;
    previous = at;
  }
  return by.subarray(0, count);
}

/** Per taint, the last taint of its run: the run ends where the queue may run dry (the next node comes after a refill). */
function runsOf(earliest: Float64Array, queued: readonly NodeRow[]): Uint32Array {
  const ends = new Uint32Array(earliest.length);
  let end = earliest.length - 1;
  for (let k = earliest.length - 1; k >= 0; k--) {
    ends[k] = end;
    // taint k began a run if it came the moment its node was queued, not at a refill
    if (k > 0 && earliest[k] === queued[k]!.queuedFrom && queued[k]!.queuedFrom > earliest[k - 1]!) end = k - 1;
  }
  return ends;
}
