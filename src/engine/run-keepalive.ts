import { messageOf } from '../core/errors.js';
import type { Ctx } from '../contract/context.js';
import type { RunAgents } from './agents.js';
import type { RunEventSink } from './events.js';
import type { FaultLedger } from './faults.js';
import { withRetries } from './retry.js';
import { renewalRetries } from './run-lock-holder.js';

/**
 * Keeps the node-side dead-men from firing while the run lives: every `everyMs` (a quarter of faultTtl, 1–30 s) a
 * touch of each node's keepalive, and the run Lease the node agents watch renewed (they touch their nodes' keepalives
 * when they see it; tried again until the next renewal). Ends when `signal` aborts.
 */
export async function keepAlive(
  o: { ctx: Ctx; ledger: FaultLedger; agents: RunAgents; everyMs: number; emit: RunEventSink },
  signal: AbortSignal,
): Promise<void> {
  const { ctx, everyMs } = o;
  for (;;) {
    try {
      await ctx.clock.sleep(everyMs, signal);
    } catch {
      return;
    }
    await o.ledger.keepalive(signal, ctx.clock.now() + everyMs);
    if (o.agents.targets.length)
      await withRetries('agents', () => o.agents.renew(signal), renewalRetries(ctx, o.emit, signal, ctx.clock.now() + everyMs)).catch(
        (e: unknown) => ctx.log.warn(`could not renew the run Lease of the node agents: ${messageOf(e)}`),
      );
  }
}
