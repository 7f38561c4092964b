import { describe, expect, it } from 'vitest';
import { lowerBound } from './order.js';

describe('lowerBound', () => {
  it('counts the elements below, for numbers and for strings in code-unit order', () => {
    const xs = [1, 3, 3, 7];
    expect([0, 1, 3, 4, 7, 8].map((x) => lowerBound(xs, x))).toEqual([0, 0, 1, 3, 3, 4]);
    expect(lowerBound(new Float64Array([0.5, 1.5]), 1)).toBe(1);
    expect(['a', 'b-2', 'b.1', 'z'].map((k) => lowerBound(['b-1', 'b-2', 'b.1'], k))).toEqual([0, 1, 2, 3]);
    expect(lowerBound([], 'x')).toBe(0);
  });
});
