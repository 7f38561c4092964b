import { type NodeFactsOf, readingFacts } from '../contract/node-facts.js';
import type { RunEvent } from '../engine/events.js';

type ReadingEvent = Extract<RunEvent, { type: 'guard-reading' | 'step-reading' | 'observation' }>;

/** A reading event as the engine emits it for a reading of a probe of this meta: with the node facts the probe declares. */
export function withFacts<E extends ReadingEvent>(meta: { nodeFacts?: NodeFactsOf<unknown> }, e: E): E {
  const facts = readingFacts(meta.nodeFacts, e.reading.value);
  return facts ? { ...e, facts } : e;
}
