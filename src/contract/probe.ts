import type { z } from 'zod';
import type { ApiAccess } from './access.js';
import type { Ctx } from './context.js';
import type { NodeFactsOf } from './node-facts.js';
import type { NumbersOf } from './reading-numbers.js';

export type ReadingStatus = 'ok' | 'violated' | 'unknown';

/** One observation. `unknown` is first-class: a probe never says `ok` from stale data. */
export interface Reading<V = unknown> {
  status: ReadingStatus;
  /** ctx.clock time of the observation. */
  at: number;
  value: V;
  /** One line a person reads. */
  detail: string;
}

/** How many entries a run report keeps of a list in a reading (names of stale nodes, tainted nodes, …). */
export const REPORTED_ENTRIES = 20;

export interface ProbeMeta<P extends z.ZodType = z.ZodType, V = unknown> {
  id: string;
  summary: string;
  description: string;
  params: P;
  /** The Kubernetes API permissions it needs (empty when it reads nodes only): preflight checks them, `manifests` grants them. */
  access: readonly ApiAccess[];
  /**
   * What a run report keeps of a reading's value when the probe watches a whole run beside the steps (the run's
   * observers): a summary a person reads in report.json. The value as it is when absent.
   */
  report?(value: V): unknown;
  /**
   * For a probe that judges selected nodes one by one: the nodes a reading's value holds not ok (a stale Lease, not
   * Ready, a NoExecute taint). Recovery objectives time each node's recovery by it (p50 and max over the nodes).
   */
  notOkNodes?(value: V): readonly string[];
  /**
   * For a probe whose readings tell the state of single nodes (a Lease's age, the Ready condition, NoExecute taints,
   * pods deleted, a predicted eviction): the kinds it gives and the facts of a reading's value. The run report's node
   * lanes are drawn from these alone; a probe without them adds nothing to the lanes.
   */
  nodeFacts?: NodeFactsOf<V>;
  /**
   * For a probe whose readings carry numbers worth a curve (PromQL series, ready replicas, objects meeting a
   * condition): what they are and those of a reading's value. The run report charts these alone.
   */
  numbers?: NumbersOf<V>;
}

/**
 * A read-only observer. `start` yields readings as the cluster changes (event-driven) until ctx.signal
 * aborts; it yields a first reading promptly (at worst `unknown`).
 */
export interface Probe<P extends z.ZodType = z.ZodType, V = unknown> {
  meta: ProbeMeta<P, V>;
  /** Its readings: a value of type V, or null while it cannot tell (unknown). */
  start(ctx: Ctx, params: z.output<P>): AsyncIterable<Reading<V | null>>;
}

export function defineProbe<P extends z.ZodType, V = unknown>(probe: Probe<P, V>): Probe<P, V> {
  return probe;
}
