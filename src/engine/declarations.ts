import type { NodeFactsOf } from '../contract/node-facts.js';
import type { Probe } from '../contract/probe.js';
import type { NumbersOf } from '../contract/reading-numbers.js';

/**
 * What a reading event carries of its probe beside the reading: its declarations of node facts and of numbers, when it
 * has them. Sinks take the facts and numbers from the reading as redaction left it, so they never hold what the value
 * no longer does.
 */
export function withDeclarations(probe: Probe): { nodeFacts?: NodeFactsOf<unknown>; numbers?: NumbersOf<unknown> } {
  const { nodeFacts, numbers } = probe.meta;
  return { ...(nodeFacts ? { nodeFacts } : {}), ...(numbers ? { numbers } : {}) };
}
