import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const HEAP = fileURLToPath(new URL('./heap.ts', import.meta.url));

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

describe('tuneHeap', () => {
  it("keeps V8's young generation small under a stream of short-lived objects (watch events)", () => {
    const tuned = youngGenerationAfterChurn(true);
    const untuned = youngGenerationAfterChurn(false);
    expect(tuned, `young generation ${tuned} MiB with tuneHeap, ${untuned} MiB without`).toBeLessThanOrEqual(4);
    expect(untuned).toBeGreaterThan(tuned * 4);
  });
});
