import type { NodeFactsOf } from '../contract/node-facts.js';
import type { Probe } from '../contract/probe.js';

/**
 * What a reading event carries of its probe beside the reading: its declaration of node facts, when it has one. Sinks
 * take the facts from the reading as redaction left it, so the facts never hold what the value no longer does.
 */
export function withNodeFacts(probe: Probe): { nodeFacts?: NodeFactsOf<unknown> } {
  return probe.meta.nodeFacts ? { nodeFacts: probe.meta.nodeFacts } : {};
}
