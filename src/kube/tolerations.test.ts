import { describe, expect, it } from 'vitest';
import type { SlimDeviceTaint } from './dra.js';
import type { SlimTaint, SlimToleration } from './resources.js';
import { NOT_READY, type TaintLike, type TolerationLike, UNREACHABLE, toleratesTaint, tolerationMs } from './tolerations.js';

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

describe('one toleration against one taint: a node taint for the taint manager, a device taint for DRA', () => {
  const node: SlimTaint = { key: UNREACHABLE, effect: 'NoExecute' };
  const device: SlimDeviceTaint = { key: 'example.com/broken', value: 'ecc', effect: 'NoExecute', timeAdded: 0 };
  const cases: [string, TolerationLike, TaintLike, boolean][] = [
    ['Exists on the key, any value', { key: UNREACHABLE, operator: 'Exists' }, node, true],
    ['Exists on the key, a device taint with a value', { key: 'example.com/broken', operator: 'Exists' }, device, true],
    ['Exists on another key', { key: NOT_READY, operator: 'Exists' }, node, false],
    ['Exists with an empty key: every taint', { operator: 'Exists' }, node, true],
    ['Exists with an empty key: every device taint', { operator: 'Exists', effect: 'NoExecute' }, device, true],
    ['Equal (the default) on the same value', { key: 'example.com/broken', value: 'ecc' }, device, true],
    ['Equal on another value', { key: 'example.com/broken', operator: 'Equal', value: 'thermal' }, device, false],
    ['Equal without a value, a taint without one', { key: UNREACHABLE, operator: 'Equal' }, node, true],
    ['Equal without a value, a taint with one', { key: 'example.com/broken', operator: 'Equal' }, device, false],
    ['an empty effect: every effect', { key: UNREACHABLE, operator: 'Exists' }, { ...node, effect: 'NoSchedule' }, true],
    ['another effect', { key: UNREACHABLE, operator: 'Exists', effect: 'NoSchedule' }, node, false],
    ['an operator no release knows', { key: UNREACHABLE, operator: 'In' }, node, false],
  ];
  it.each(cases)('%s', (_, toleration, taint, expected) => expect(toleratesTaint(toleration, taint)).toBe(expected));

  it("the taint manager takes each taint's first matching toleration and the smallest tolerationSeconds among them", () => {
    const notReady: SlimTaint = { key: NOT_READY, effect: 'NoExecute' };
    // the first matching toleration decides for its taint, even when a later one tolerates it longer or forever
    expect(
      tolerationMs(
        [
          { key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', seconds: 300 },
          { operator: 'Exists', seconds: 60 },
        ],
        [node, notReady],
      ),
    ).toBe(60_000);
    expect(tolerationMs([{ operator: 'Exists', seconds: 30 }, { operator: 'Exists' }], [node])).toBe(30_000);
    expect(tolerationMs([{ operator: 'Exists' }], [node, notReady])).toBe(Infinity);
    // a taint none tolerates, or tolerationSeconds of 0 or less: at once
    expect(tolerationMs([{ key: UNREACHABLE, operator: 'Exists' }], [node, notReady])).toBe(0);
    expect(tolerationMs([{ operator: 'Exists', seconds: -5 }], [node])).toBe(0);
    // no NoExecute taint: nothing to evict for
    expect(tolerationMs([], [])).toBe(Infinity);
  });
});
