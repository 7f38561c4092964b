import { setFlagsFromString } from 'node:v8';

/**
 * How the CLI's heap grows, for a run over a large cluster: it parses a steady stream of watch events (500 lease
 * renewals a second at 5,000 nodes) into objects that die at once or replace the ones they update, and judges
 * thousands of failing nodes a few times a second. What it holds stays small (about 90 MiB at 5,000 nodes and
 * 150,000 pods); what it throws away is what makes it large.
 *
 * - `--semi-space-growth-factor=1` keeps V8's young generation at its first size (1 MiB semi-spaces) instead of
 *   letting it grow to 16–32 MiB: with the default growth the young generation, and what it promotes early, kept
 *   the process far larger than what it holds (bench/probes-memory.bench.js at 150,000 pods: a peak of 218 MiB RSS
 *   with this setting, 556 MiB without; CPU within the benchmark's noise). Read as the heap grows, so setting it when
 *   the process starts takes effect; `--max-semi-space-size` would not (it is fixed when the heap is made).
 * - `--heap-growing-percent=50`: after a full collection the old generation may grow by half of what survived
 *   before the next one, instead of up to four times it (V8's factor for a heap whose limit is gigabytes). Objects
 *   that live a few hundred milliseconds (a judgement's forecast, the store entries a watch replaces) are promoted
 *   and die there; with the default factor they piled up to 470 MiB RSS around 93 MiB live (2,500 of 5,000 nodes
 *   failing, 150,000 pods, BENCHMARKS.md), with this one 250 MiB, at no more CPU. Read after each full collection.
 */
export function tuneHeap(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--heap-growing-percent=50');
}
