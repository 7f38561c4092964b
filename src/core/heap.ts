import { setFlagsFromString } from 'node:v8';

/**
 * Keeps V8's young generation at its first size (1 MiB semi-spaces) instead of letting it grow to 16–32 MiB. A run
 * over a large cluster parses a steady stream of watch events (500 lease renewals a second at 5,000 nodes) into
 * objects that die at once; with the default growth the young generation, and what it promotes early, keep the
 * process far larger than what it holds (bench/probes-memory.bench.js at 150,000 pods: a peak of 218 MiB RSS with
 * this setting, 556 MiB without; CPU within the benchmark's noise). `--semi-space-growth-factor` is read as the
 * heap grows, so setting it when the process starts takes effect; `--max-semi-space-size` would not (it is fixed
 * when the heap is made).
 */
export function tuneHeap(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
}
