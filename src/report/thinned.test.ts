import { describe, expect, it } from 'vitest';
import { ThinnedHistory } from './thinned.js';

describe('a thinned reading history', () => {
  it('keeps every reading that must stay and an even sample of the rest over the whole run', () => {
    const h = new ThinnedHistory<{ at: number; violated: boolean }>(200);
    // 10,000 readings, one in 97 a violation
    for (let at = 0; at < 10_000; at++) h.push({ at, violated: at % 97 === 0 }, at % 97 === 0);
    const violations = h.entries.filter((e) => e.violated);
    expect(violations).toHaveLength(Math.ceil(10_000 / 97));
    const ordinary = h.entries.filter((e) => !e.violated);
    expect(ordinary.length).toBeGreaterThan(100);
    expect(ordinary.length).toBeLessThanOrEqual(200);
    // from the start to the end, in order, with no gap much wider than the sampling step
    expect(h.entries.map((e) => e.at)).toEqual([...h.entries.map((e) => e.at)].sort((a, b) => a - b));
    expect(ordinary[0]!.at).toBe(1);
    expect(ordinary.at(-1)!.at).toBeGreaterThan(10_000 - 2 * h.every);
    const gaps = ordinary.slice(1).map((e, i) => e.at - ordinary[i]!.at);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(h.every + 2);
    expect(h.thinned).toBe(true);
    expect(h.seen).toBe(10_000);
  });

  it('keeps everything while it fits', () => {
    const h = new ThinnedHistory<number>(200);
    for (let i = 0; i < 150; i++) h.push(i, false);
    expect(h.entries).toHaveLength(150);
    expect(h.thinned).toBe(false);
  });
});
