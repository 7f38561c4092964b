import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { describeHalt, type Halt, haltFlag, haltLeases, haltNamespaces, type HaltState, readHalt } from '../kube/halt.js';

/** How often a run reads the halt: a halt reaches every run within about this long. */
const HALT_POLL_MS = 1_000;

/**
 * Watches the halts that stop a run locked in `lockNamespace` (src/kube/halt.ts: the cluster's, in kube-system, and the
 * lock namespace's own) beside the guards, from the moment the run holds the lock to its end: reads them every
 * `everyMs` and calls `onHalt` once, the first time one is set. Only whether it is set counts; who set it and why are
 * told, never acted on. A read that fails (an apiserver struggling) is tried again at the next tick, and said once until
 * the reads succeed again; a halt set in the other namespace meanwhile still stops the run.
 */
export async function watchHalt(
  ctx: Pick<Ctx, 'kube' | 'clock' | 'log'>,
  o: { lockNamespace: string; signal: AbortSignal; everyMs?: number; onHalt: (halt: Halt, text: string) => void },
): Promise<void> {
  const namespaces = haltNamespaces(o.lockNamespace);
  let failing = false;
  while (!o.signal.aborted) {
    const reads = await Promise.allSettled(
      namespaces.map((namespace) => readHalt(ctx.kube, { namespace, timeoutMs: 5_000, signal: o.signal })),
    );
    if (o.signal.aborted) return;
    const set = reads.find((r): r is PromiseFulfilledResult<HaltState> => r.status === 'fulfilled' && r.value.halt !== undefined);
    if (set) return o.onHalt(set.value.halt!, describeHalt(set.value.namespace, set.value.halt!));
    const failed = reads.flatMap((r, i) => (r.status === 'rejected' ? [`Lease ${namespaces[i]}: ${messageOf(r.reason)}`] : []));
    if (failed.length && !failing) ctx.log.warn(`cannot read the halt (${failed.join('; ')}); trying again`);
    failing = failed.length > 0;
    await ctx.clock.sleep(o.everyMs ?? HALT_POLL_MS, o.signal).catch(() => undefined);
  }
}

/**
 * Preflight's check of the halts that stop a run locked in `lockNamespace`, as `[ok, detail]`: a run is refused while
 * one is set, naming it, who set it, when and why; and when one cannot be read (`tried` retries a read as preflight
 * retries its reads). The detail names the Leases read, so a user knows which halt stops the run.
 */
export async function haltCheck(
  ctx: Pick<Ctx, 'kube' | 'signal'>,
  lockNamespace: string,
  tried: (read: () => Promise<HaltState>) => Promise<HaltState>,
): Promise<[boolean, string]> {
  const namespaces = haltNamespaces(lockNamespace);
  for (const namespace of namespaces) {
    try {
      const { halt } = await tried(() => readHalt(ctx.kube, { namespace, signal: ctx.signal }));
      if (halt) return [false, `${describeHalt(namespace, halt)}; no run starts until \`kube-runbook resume${haltFlag(namespace)}\``];
    } catch (e) {
      return [false, `cannot read the halt (${haltLeases([namespace])}): ${messageOf(e)}`];
    }
  }
  return [true, `no halt is set (${haltLeases(namespaces)})`];
}
