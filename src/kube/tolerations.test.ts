import { describe, expect, it } from 'vitest';
import type { SlimTaint, SlimToleration } from './resources.js';
import { tolerationMs } from './tolerations.js';

const taint = (value?: string): SlimTaint => ({ key: 'example.com/gpu-errors', value, effect: 'NoExecute' });
const tol = (operator: string, value: string, seconds?: number): SlimToleration => ({
  key: 'example.com/gpu-errors',
  operator,
  value,
  effect: 'NoExecute',
  seconds,
});

describe('tolerations with the numeric operators Lt and Gt (alpha since 1.35)', () => {
  it('tolerate nothing while TaintTolerationComparisonOperators is off, as on a 1.37 server by default: evicted at once', () => {
    expect(tolerationMs([tol('Gt', '5', 60)], [taint('10')])).toBe(0);
    expect(tolerationMs([tol('Lt', '50')], [taint('10')])).toBe(0);
  });

  it('compare the taint value against the toleration value as integers where the gate is on', () => {
    // Lt: tolerated while the taint's value is below the toleration's; Gt: above it
    expect(tolerationMs([tol('Lt', '50', 60)], [taint('10')], true)).toBe(60_000);
    expect(tolerationMs([tol('Lt', '10', 60)], [taint('10')], true)).toBe(0);
    expect(tolerationMs([tol('Gt', '5')], [taint('10')], true)).toBe(Infinity);
    expect(tolerationMs([tol('Gt', '-3')], [taint('-2')], true)).toBe(Infinity);
    expect(tolerationMs([tol('Gt', '10')], [taint('9')], true)).toBe(0);
    // integers past 2^53 still compare exactly
    expect(tolerationMs([tol('Lt', '9007199254740993')], [taint('9007199254740992')], true)).toBe(Infinity);
  });

  it('never match a value that is not a canonical int64 (leading zeros, signs, fractions, empty, overflow), never throw', () => {
    for (const [limit, value] of [
      ['010', '5'],
      ['5', '+7'],
      ['1.5', '1'],
      ['5', ''],
      ['5', undefined],
      ['-0', '-1'],
      ['9223372036854775808', '1'],
      ['abc', '1'],
    ] as const)
      expect(tolerationMs([tol('Lt', limit, 30)], [taint(value)], true)).toBe(0);
  });

  it('an operator no release knows tolerates nothing, and a later toleration that matches is used', () => {
    expect(tolerationMs([tol('Between', '1')], [taint('1')], true)).toBe(0);
    expect(tolerationMs([tol('Between', '1'), { key: 'example.com/gpu-errors', operator: 'Exists', seconds: 20 }], [taint('1')])).toBe(
      20_000,
    );
  });
});
