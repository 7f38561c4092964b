import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { duration, durationsAsText } from './zod-helpers.js';

describe('durationsAsText', () => {
  const schema = z.object({
    timeout: duration().prefault('2m'),
    count: z.number().int(),
    flapping: z.object({ transitions: z.number(), window: duration() }).prefault({ transitions: 3, window: '5m' }),
    either: z.union([z.literal('off'), duration()]).optional(),
    steps: z.array(duration()).optional(),
  });

  it('writes durations back as a person writes them, wherever they nest, and leaves other numbers', () => {
    const parsed = schema.parse({ timeout: '90s', count: 120000, either: '1h30m', steps: ['15s', '500ms'] });
    expect(parsed.timeout).toBe(90_000);
    expect(durationsAsText(schema, parsed)).toEqual({
      timeout: '1m30s',
      count: 120000,
      flapping: { transitions: 3, window: '5m' },
      either: '1h30m',
      steps: ['15s', '500ms'],
    });
  });

  it('of a discriminated union, follows the alternative the value is', () => {
    const union = z.discriminatedUnion('type', [
      z.object({ type: z.literal('a'), wait: z.number() }),
      z.object({ type: z.literal('b'), wait: duration() }),
    ]);
    expect(durationsAsText(union, union.parse({ type: 'b', wait: '2m' }))).toEqual({ type: 'b', wait: '2m' });
    expect(durationsAsText(union, union.parse({ type: 'a', wait: 120000 }))).toEqual({ type: 'a', wait: 120000 });
  });

  it('leaves values it has no schema for as they are', () => {
    expect(durationsAsText(schema, { other: 5000, either: 'off' })).toEqual({ other: 5000, either: 'off' });
  });
});
