import type { ActionCtx } from '../../contract/context.js';
import { formatDuration } from '../../core/duration.js';
import { KrError, messageOf } from '../../core/errors.js';

/** The taints the node lifecycle controller puts on a node it cannot hear from, and takes off once it is Ready. */
const LIFECYCLE_TAINTS = new Set(['node.kubernetes.io/unreachable', 'node.kubernetes.io/not-ready']);

interface NodeList {
  items?: {
    metadata?: { name?: string };
    spec?: { taints?: { key?: string; effect?: string }[] };
    status?: { conditions?: { type?: string; status?: string }[] };
  }[];
}

/**
 * Ready nodes that still carry an unreachable/not-ready NoExecute taint, or undefined when the nodes cannot be read.
 * Their taints were added when they went silent, so their pods' tolerations count from then: a taint-eviction
 * controller started now could delete those pods at once, before the lifecycle controller takes the taints off.
 */
export async function readyButTainted(ctx: Pick<ActionCtx, 'kube' | 'signal'>): Promise<string[] | undefined> {
  try {
    const r = await ctx.kube.raw('/api/v1/nodes', { timeoutMs: 10_000, signal: ctx.signal });
    if (r.status !== 200) return undefined;
    const list = JSON.parse(r.body) as NodeList;
    return (list.items ?? [])
      .filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
      .filter((n) => n.spec?.taints?.some((t) => t.effect === 'NoExecute' && LIFECYCLE_TAINTS.has(t.key ?? '')))
      .map((n) => n.metadata?.name ?? '?')
      .sort();
  } catch {
    return undefined;
  }
}

/**
 * Waits until no Ready node carries the lifecycle controller's NoExecute taints (it removes them within a monitor
 * period of seeing the node Ready), up to `timeoutMs`; throws TAINTS_REMAIN after that. It fails closed: nodes that
 * cannot be read are asked again until the same deadline, then TAINTS_UNKNOWN, since evicting again while such a
 * taint may remain could delete that node's pods at once.
 */
export async function waitForLifecycleTaintsGone(ctx: ActionCtx, timeoutMs: number, what: string): Promise<void> {
  const deadline = ctx.clock.now() + timeoutMs;
  for (;;) {
    const tainted = await readyButTainted(ctx);
    if (tainted === undefined && ctx.clock.now() >= deadline)
      throw new KrError(
        'TAINTS_UNKNOWN',
        `${what}: the nodes could not be read for ${formatDuration(timeoutMs)} to check that no Ready node still carries the unreachable/not-ready NoExecute taint; ` +
          "evicting again could delete such a node's pods at once, so it stays as it is (`kube-runbook recover` tries again once the apiserver answers)",
        // a wait that has not succeeded yet: the revert is tried again until its own deadline
        { transient: 'nodes unreadable' },
      );
    if (tainted === undefined)
      ctx.log.warn(`${what}: cannot read the nodes to check for NoExecute taints left on Ready nodes; asking again`);
    else if (!tainted.length) return;
    else if (ctx.clock.now() >= deadline)
      throw new KrError(
        'TAINTS_REMAIN',
        `${what}: Ready node(s) ${tainted.join(', ')} still carry the unreachable/not-ready NoExecute taint after ${formatDuration(timeoutMs)}; ` +
          'evicting again now could delete their pods at once, so it stays as it is (check the node lifecycle controller, then `kube-runbook recover`)',
        { transient: 'taints remain' },
      );
    else ctx.log.info(`${what}: waiting for the NoExecute taints of Ready node(s) ${tainted.join(', ')} to be removed`);
    try {
      await ctx.clock.sleep(1000, ctx.signal);
    } catch (e) {
      throw new KrError('ABORTED', `${what}: stopped while waiting for taints to be removed: ${messageOf(e)}`);
    }
  }
}
