import type { z } from 'zod';
import type { ApiAccess } from './access.js';
import type { Ctx } from './context.js';

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

export interface ProbeMeta<P extends z.ZodType = z.ZodType> {
  id: string;
  summary: string;
  description: string;
  params: P;
  /** The Kubernetes API permissions it needs (empty when it reads nodes only): preflight checks them, `manifests` grants them. */
  access: readonly ApiAccess[];
}

/**
 * A read-only observer. `start` yields readings as the cluster changes (event-driven) until ctx.signal
 * aborts; it yields a first reading promptly (at worst `unknown`).
 */
export interface Probe<P extends z.ZodType = z.ZodType> {
  meta: ProbeMeta<P>;
  start(ctx: Ctx, params: z.output<P>): AsyncIterable<Reading>;
}

export function defineProbe<P extends z.ZodType>(probe: Probe<P>): Probe<P> {
  return probe;
}
