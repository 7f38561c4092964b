import type { Confirmer } from './confirm.js';
import type { Ctx } from '../contract/context.js';
import type { RunEventSink } from './events.js';
import type { ObserverProbe } from './access.js';
import type { Plan } from './plan.js';
import type { RunAgents } from './agents.js';
import { PREFLIGHT_CHECKS, preflightState } from './preflight-checks.js';

export interface PreflightResult {
  ok: boolean;
  failures: string[];
}

/**
 * Everything checked before anything is touched: the context is allowed, RBAC suffices, the nodes the plan acts on
 * answer through their transport, each action's own preflight passes on each target, and confirm steps can be
 * answered. The checks (PREFLIGHT_CHECKS) run in order; all failures are reported, but a check whose failure the
 * ones after it would only repeat (a context not allowed, agents or nodes not answering) ends the preflight. Reads
 * failing for a transient reason are tried again for a few seconds each, every failed attempt reported (not
 * journaled: a refused run leaves no journal).
 */
export async function preflight(
  plan: Plan,
  ctx: Ctx,
  confirmer: Confirmer,
  emit: RunEventSink,
  observers: readonly ObserverProbe[] = [],
  /** The run's agents, started here once RBAC and the run lock are checked (a dry run starts none). */
  agents?: RunAgents,
): Promise<PreflightResult> {
  const s = preflightState({ plan, ctx, confirmer, emit, observers, agents });
  for (const c of PREFLIGHT_CHECKS) if ((await c.run(s)) === 'stop') break;
  return { ok: s.failures.length === 0, failures: s.failures };
}
