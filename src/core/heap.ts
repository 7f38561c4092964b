import { setFlagsFromString } from 'node:v8';

/**
 * How the CLI's heap grows, for a run over a large cluster: it parses a steady stream of watch events (every lease
 * renewal of every node) into objects that die at once or replace the ones they update, and judges thousands of
 * failing nodes a few times a second. What it holds stays small; what it throws away is what makes it large. What
 * each flag saves is measured by bench/probes-memory.bench.js (BENCHMARKS.md, "The executor's memory at scale").
 *
 * - `--semi-space-growth-factor=1` keeps V8's young generation at its first size instead of letting it grow many
 *   times over: with the default growth the young generation, and what it promotes early, kept the process far larger
 *   than what it holds, at no saving of CPU. Read as the heap grows, so setting it when the process starts takes
 *   effect; `--max-semi-space-size` would not (it is fixed when the heap is made).
 * - `--heap-growing-percent=50`: after a full collection the old generation may grow by half of what survived
 *   before the next one, instead of up to four times it (V8's factor for a heap whose limit is gigabytes). Objects
 *   that live a few hundred milliseconds (a judgement's forecast, the store entries a watch replaces) are promoted
 *   and die there; with the default factor they piled up to several times what is live. Read after each full
 *   collection.
 */
export function tuneHeap(): void {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--heap-growing-percent=50');
}
