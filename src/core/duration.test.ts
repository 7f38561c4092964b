import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['10s', 10_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1m30s', 90_000],
    ['1.5s', 1500],
  ])('%s → %d ms', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(['', '10', 's', '10 s', '10sec', '-5s', '5d', 'abc', '1m 30s'])('refuses %j', (text) =>
    expect(parseDuration(text)).toBeUndefined(),
  );
});

describe('formatDuration', () => {
  it('prints what a person reads', () => {
    expect(formatDuration(500)).toBe('500ms');
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(-2000)).toBe('-2s');
  });
});
