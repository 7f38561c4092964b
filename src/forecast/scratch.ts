/*
 * Memory the eviction forecast (forecast.ts) works in, kept from one judgement to the next by a caller that judges
 * again and again (the probe does, up to 4 times a second): with thousands of nodes failing, the typed arrays a
 * judgement made anew (per node, per zone, for the taint queue) were memory the engine zeroed and the garbage
 * collector then went through. Kept, a judgement of 5,000 failing nodes takes 0.87× the time at the median and 0.7× at
 * p99 (bench/forecast.bench.js, on a thread of its own).
 */

import type { SlimTaint } from '../kube/resources.js';

/** What each array is for: one array per use, so that no two uses in a judgement share memory. */
type Use = 'judged' | 'byZone' | 'late' | 'early' | 'queue' | 'when' | 'sorted' | 'placed' | 'order' | 'lates' | 'nexts';

/**
 * Arrays by use, each grown to the largest length asked for and handed out as a view exactly as long as asked. What
 * a view holds is left from the judgement before: the forecast writes every place it reads, or fills the view first.
 * Nothing the forecast returns refers to them.
 */
export class ForecastScratch {
  private readonly buffers = new Map<Use, ArrayBuffer>();
  /** The column of the controller's taints (Judged.controllerTaint): objects, so an array of its own. */
  readonly taints: (SlimTaint | undefined)[] = [];

  /** `bytes` bytes for `use`, at least. */
  buffer(use: Use, bytes: number): ArrayBuffer {
    let b = this.buffers.get(use);
    if (!b || b.byteLength < bytes) this.buffers.set(use, (b = new ArrayBuffer(Math.max(bytes, 2 * (b?.byteLength ?? 0)))));
    return b;
  }

  float64(use: Use, length: number): Float64Array {
    return new Float64Array(this.buffer(use, 8 * length), 0, length);
  }

  int32(use: Use, length: number): Int32Array {
    return new Int32Array(this.buffer(use, 4 * length), 0, length);
  }
}
