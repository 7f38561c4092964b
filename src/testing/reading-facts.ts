import type { NodeFactsOf } from '../contract/node-facts.js';
import type { NumbersOf } from '../contract/reading-numbers.js';
import type { RunEvent } from '../engine/events.js';

type ReadingEvent = Extract<RunEvent, { type: 'guard-reading' | 'step-reading' | 'observation' }>;
type GuardReading = Extract<RunEvent, { type: 'guard-reading' }>;
type FactsMeta = { nodeFacts?: NodeFactsOf<unknown>; numbers?: NumbersOf<unknown> };

/** A reading event as the engine emits it for a reading of a probe of this meta: with its declarations of node facts and numbers. */
export function withFacts<E extends ReadingEvent>(meta: FactsMeta, e: E): E {
  return { ...e, ...(meta.nodeFacts ? { nodeFacts: meta.nodeFacts } : {}), ...(meta.numbers ? { numbers: meta.numbers } : {}) };
}

/** An armed guard's reading at `at`, of a probe of this meta, as the engine emits it (`withFacts`). */
export function guardReading(meta: FactsMeta, guard: string, at: number, reading: GuardReading['reading']): GuardReading {
  return withFacts(meta, { type: 'guard-reading', at, guard, armed: true, reading });
}
