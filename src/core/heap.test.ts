import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// heap.ts as the built CLI runs it, plain JavaScript: a child that loads TypeScript itself first loads a compiler whose
// memory changes what a single-threaded collector does (4.6× live instead of 3.0×), which the CLI never sees.
const dir = mkdtempSync(join(tmpdir(), 'heap-test-'));
const HEAP = join(dir, 'heap.mjs');
writeFileSync(HEAP, stripTypeScriptTypes(readFileSync(new URL('./heap.ts', import.meta.url), 'utf8')));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The young generation's size (MiB) in a fresh Node after it made 200 MB of short-lived objects. */
function youngGenerationAfterChurn(tune: boolean): number {
  const script = `
    ${tune ? `const { tuneHeap } = await import(${JSON.stringify(HEAP)}); tuneHeap();` : ''}
    const { getHeapSpaceStatistics } = await import('node:v8');
    let keep = 0;
    for (let i = 0; i < 2e6; i++) keep += JSON.parse('{"metadata":{"name":"lease-' + i + '","resourceVersion":"' + i + '"}}').metadata.name.length;
    const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    process.stdout.write(String(young.space_size / 2 ** 20));
  `;
  return Number(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }));
}

/**
 * The most heap in use, and what is live at the end, in a fresh Node whose store of 20,000 objects (about 20 MiB) is
 * replaced entry by entry 30 times over, as a watch's store is by its events: each old entry dies in the old
 * generation. `--predictable` makes the collector single-threaded and its schedule a function of the allocation alone,
 * so the figures repeat to the megabyte however busy the machine is; with concurrent marking they depend on how soon
 * the marking thread gets a core (2.0× and 2.8× live seen from the same build).
 */
function oldGenerationUnderReplacement(tune: boolean): { peak: number; live: number } {
  const script = `
    const v8 = await import('node:v8');
    ${tune ? `const { tuneHeap } = await import(${JSON.stringify(HEAP)}); tuneHeap();` : `v8.setFlagsFromString('--semi-space-growth-factor=1');`}
    const store = new Map();
    const make = (i, v) => ({ name: 'node-' + i, v, labels: { zone: 'z-' + (i % 3), a: 'x'.repeat(200) + v }, conditions: Array.from({ length: 5 }, (_, k) => ({ type: 'c' + k, status: 'True', at: v + k })) });
    for (let i = 0; i < 20000; i++) store.set(i, make(i, 0));
    let peak = 0;
    for (let r = 1; r <= 30; r++) {
      for (let i = 0; i < 20000; i++) {
        store.set(i, make(i, r));
        if (i % 500 === 0) peak = Math.max(peak, v8.getHeapStatistics().used_heap_size);
      }
    }
    v8.setFlagsFromString('--expose-gc');
    (await import('node:vm')).runInNewContext('gc')();
    const live = v8.getHeapStatistics().used_heap_size;
    process.stdout.write(JSON.stringify({ peak: peak / 2 ** 20, live: live / 2 ** 20, kept: store.size }));
  `;
  return JSON.parse(execFileSync(process.execPath, ['--predictable', '--input-type=module', '-e', script], { encoding: 'utf8' })) as {
    peak: number;
    live: number;
  };
}

describe('tuneHeap', () => {
  it('lets the old generation grow by half of what it holds between full collections, not four times it', () => {
    const tuned = oldGenerationUnderReplacement(true);
    const untuned = oldGenerationUnderReplacement(false);
    const say = `peak ${tuned.peak.toFixed(0)} MiB around ${tuned.live.toFixed(0)} MiB live with tuneHeap, ${untuned.peak.toFixed(0)} MiB without`;
    // half again as much, the young generation, and what is allocated while a collection marks (3.0× live seen);
    // V8's default factor gives 6.0×
    expect(tuned.peak, say).toBeLessThanOrEqual(tuned.live * 3.5);
    expect(untuned.peak, say).toBeGreaterThan(tuned.peak * 1.6);
  });

  it("keeps V8's young generation small under a stream of short-lived objects (watch events)", () => {
    const tuned = youngGenerationAfterChurn(true);
    const untuned = youngGenerationAfterChurn(false);
    expect(tuned, `young generation ${tuned} MiB with tuneHeap, ${untuned} MiB without`).toBeLessThanOrEqual(4);
    expect(untuned).toBeGreaterThan(tuned * 4);
  });
});
