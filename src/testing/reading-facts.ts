import type { NodeFactsOf } from '../contract/node-facts.js';
import type { NumbersOf } from '../contract/reading-numbers.js';
import type { RunEvent } from '../engine/events.js';

type ReadingEvent = Extract<RunEvent, { type: 'guard-reading' | 'step-reading' | 'observation' }>;

/** A reading event as the engine emits it for a reading of a probe of this meta: with its declarations of node facts and numbers. */
export function withFacts<E extends ReadingEvent>(meta: { nodeFacts?: NodeFactsOf<unknown>; numbers?: NumbersOf<unknown> }, e: E): E {
  return { ...e, ...(meta.nodeFacts ? { nodeFacts: meta.nodeFacts } : {}), ...(meta.numbers ? { numbers: meta.numbers } : {}) };
}
