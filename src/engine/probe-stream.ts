import type { Ctx } from '../contract/context.js';
import type { Probe, Reading } from '../contract/probe.js';
import { messageOf } from '../core/errors.js';

/**
 * Consumes a probe's readings until `signal` aborts or `onReading` returns true. A probe that throws or ends
 * early is reported as one `unknown` reading (it can no longer see), never as silence.
 */
export async function consumeProbe(
  ctx: Ctx,
  probe: Probe,
  params: Record<string, unknown>,
  signal: AbortSignal,
  onReading: (r: Reading) => boolean | void,
): Promise<void> {
  const probeCtx: Ctx = { ...ctx, signal };
  let it: AsyncIterator<Reading> | undefined;
  const aborted = new Promise<IteratorResult<Reading>>((resolve) => {
    if (signal.aborted) resolve({ done: true, value: undefined });
    signal.addEventListener('abort', () => resolve({ done: true, value: undefined }), { once: true });
  });
  try {
    it = probe.start(probeCtx, params)[Symbol.asyncIterator]();
    while (!signal.aborted) {
      const next = await Promise.race([it.next(), aborted]);
      if (next.done) break;
      if (onReading(next.value)) return;
    }
    if (!signal.aborted)
      onReading({ status: 'unknown', at: ctx.clock.now(), value: null, detail: `probe ${probe.meta.id} stopped reporting` });
  } catch (e) {
    if (!signal.aborted)
      onReading({ status: 'unknown', at: ctx.clock.now(), value: null, detail: `probe ${probe.meta.id} failed: ${messageOf(e)}` });
  } finally {
    void it?.return?.().catch(() => {});
  }
}

export interface WaitResult {
  /** The wanted status was read. */
  met: boolean;
  /** `status: detail` of the last reading. */
  last: string;
  timedOut: boolean;
}

/** Watches a probe until it reads `want`, `withinMs` passes, or `signal` aborts. */
export async function waitForReading(
  ctx: Ctx,
  probe: Probe,
  params: Record<string, unknown>,
  want: Reading['status'],
  withinMs: number,
  signal: AbortSignal,
  onReading?: (r: Reading) => void,
): Promise<WaitResult> {
  const local = new AbortController();
  const onAbort = () => local.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const cancel = ctx.clock.setTimer(withinMs, () => {
    timedOut = true;
    local.abort();
  });
  let last = 'no reading';
  let met = false;
  try {
    await consumeProbe(ctx, probe, params, local.signal, (r) => {
      last = `${r.status}: ${r.detail}`;
      onReading?.(r);
      met = r.status === want;
      return met;
    });
  } finally {
    cancel();
    signal.removeEventListener('abort', onAbort);
  }
  return { met, last, timedOut };
}
