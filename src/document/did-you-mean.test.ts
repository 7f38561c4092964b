import { describe, expect, it } from 'vitest';
import { closest, editDistance } from './did-you-mean.js';

describe('editDistance', () => {
  it.each([
    ['steps', 'steps', 0],
    ['stepz', 'steps', 1],
    ['wiht', 'with', 1],
    ['acton', 'action', 1],
    ['', 'abc', 3],
    ['kitten', 'sitting', 3],
  ])('%s → %s: %d', (a, b, d) => expect(editDistance(a, b)).toBe(d));
});

describe('closest', () => {
  const keys = ['name', 'action', 'with', 'timeout', 'expect', 'within', 'wait', 'confirm', 'parallel'];
  it('suggests the nearest key for a typo', () => {
    expect(closest('wiht', keys)).toBe('with');
    expect(closest('paralel', keys)).toBe('parallel');
    expect(closest('Timeout', keys)).toBe('timeout');
    expect(closest('stop-apiservr', ['run-command', 'stop-apiserver', 'stop-kubelet'])).toBe('stop-apiserver');
  });
  it('suggests nothing when nothing is close', () => {
    expect(closest('owner', keys)).toBeUndefined();
    expect(closest('x', keys)).toBeUndefined();
    expect(closest('make-coffee', ['run-command'])).toBeUndefined();
  });
});
