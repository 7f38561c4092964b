import type { NodeFactsOf } from '../contract/node-facts.js';
import type { RunEvent } from '../engine/events.js';

type ReadingEvent = Extract<RunEvent, { type: 'guard-reading' | 'step-reading' | 'observation' }>;

/** A reading event as the engine emits it for a reading of a probe of this meta: with its declaration of node facts. */
export function withFacts<E extends ReadingEvent>(meta: { nodeFacts?: NodeFactsOf<unknown> }, e: E): E {
  return meta.nodeFacts ? { ...e, nodeFacts: meta.nodeFacts } : e;
}
