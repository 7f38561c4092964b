import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { describeHalt, type Halt, HALT_NAME, type HaltState, readHalt } from '../kube/halt.js';

/** How often a run reads the halt: a halt reaches every run within about this long. */
const HALT_POLL_MS = 1_000;

/**
 * Watches the halt (src/kube/halt.ts) beside the guards, from the moment the run holds the lock to its end: reads it
 * every `everyMs` and calls `onHalt` once, the first time it is set. Only whether it is set counts; who set it and why
 * are told, never acted on. A read that fails (an apiserver struggling) is tried again at the next tick, and said once
 * until a read succeeds again.
 */
export async function watchHalt(
  ctx: Pick<Ctx, 'kube' | 'clock' | 'log'>,
  o: { namespace: string; signal: AbortSignal; everyMs?: number; onHalt: (halt: Halt, text: string) => void },
): Promise<void> {
  let failing = false;
  while (!o.signal.aborted) {
    try {
      const { halt } = await readHalt(ctx.kube, { namespace: o.namespace, timeoutMs: 5_000, signal: o.signal });
      failing = false;
      if (halt) return o.onHalt(halt, describeHalt(o.namespace, halt));
    } catch (e) {
      if (o.signal.aborted) return;
      if (!failing) ctx.log.warn(`cannot read the halt (${messageOf(e)}); trying again`);
      failing = true;
    }
    await ctx.clock.sleep(o.everyMs ?? HALT_POLL_MS, o.signal).catch(() => undefined);
  }
}

/**
 * Preflight's check of the halt, as `[ok, detail]`: a run is refused while it is set, naming who set it, when and why;
 * and when it cannot be read (`tried` retries the read as preflight retries its reads).
 */
export async function haltCheck(
  ctx: Pick<Ctx, 'kube' | 'signal'>,
  namespace: string,
  tried: (read: () => Promise<HaltState>) => Promise<HaltState>,
): Promise<[boolean, string]> {
  try {
    const { halt } = await tried(() => readHalt(ctx.kube, { namespace, signal: ctx.signal }));
    if (halt) return [false, `${describeHalt(namespace, halt)}; no run starts until \`kube-runbook resume\``];
    return [true, `no halt is set (Lease ${namespace}/${HALT_NAME})`];
  } catch (e) {
    return [false, `cannot read the halt (Lease ${namespace}/${HALT_NAME}): ${messageOf(e)}`];
  }
}
