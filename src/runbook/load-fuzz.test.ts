import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { defaultRegistry } from '../engine/registry.js';
import { checkRunbook } from './load.js';

/** A small seeded generator, so a failure can be replayed. */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NOISE = [
  ' ',
  '\t',
  '\n',
  ':',
  '-',
  '{',
  '}',
  '[',
  ']',
  '"',
  "'",
  '#',
  '&',
  '*',
  '!',
  '|',
  '>',
  '%',
  '@',
  '`',
  ',',
  '?',
  'x',
  '5',
  '\u00e9',
  '\0',
];

function mutate(text: string, random: () => number): string {
  let t = text;
  const edits = 1 + Math.floor(random() * 4);
  for (let i = 0; i < edits; i++) {
    const at = Math.floor(random() * (t.length + 1));
    const kind = random();
    if (kind < 0.35) t = t.slice(0, at) + t.slice(at + 1 + Math.floor(random() * 8));
    else if (kind < 0.7) t = t.slice(0, at) + NOISE[Math.floor(random() * NOISE.length)]! + t.slice(at);
    else {
      const lines = t.split('\n');
      const a = Math.floor(random() * lines.length);
      const b = Math.floor(random() * lines.length);
      [lines[a], lines[b]] = [lines[b]!, lines[a]!];
      t = lines.join('\n');
    }
  }
  return t;
}

describe('checkRunbook on damaged runbooks', () => {
  it('never throws, and places every problem inside the file', async () => {
    const original = await readFile(new URL('../../test/fixtures/valid/full.yaml', import.meta.url), 'utf8');
    const random = prng(20261122);
    let invalid = 0;
    for (let i = 0; i < 400; i++) {
      const text = mutate(original, random);
      const lines = text.split('\n').length;
      const checked = await checkRunbook(text, 'fuzz.yaml', defaultRegistry).catch((e: unknown) =>
        expect.fail(`case ${i} threw ${String(e)}:\n${text}`),
      );
      if (checked.ok) continue;
      invalid++;
      expect(checked.problems.length).toBeGreaterThan(0);
      for (const p of checked.problems) {
        expect(p.line, `case ${i}: ${JSON.stringify(p)}`).toBeGreaterThanOrEqual(1);
        expect(p.line, `case ${i}: ${JSON.stringify(p)}`).toBeLessThanOrEqual(lines);
        expect(p.col, `case ${i}: ${JSON.stringify(p)}`).toBeGreaterThanOrEqual(1);
        expect(p.message, `case ${i}`).not.toMatch(/^Invalid input|undefined|\[object Object\]/);
      }
    }
    // the damage is real: most cases are refused
    expect(invalid).toBeGreaterThan(200);
  });
});
