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

interface LeaseList {
  items?: { metadata?: { name?: string }; spec?: { renewTime?: string; leaseDurationSeconds?: number } }[];
}

async function list<T>(ctx: Pick<ActionCtx, 'kube' | 'signal'>, path: string): Promise<T | undefined> {
  const r = await ctx.kube.raw(path, { timeoutMs: 10_000, signal: ctx.signal });
  return r.status === 200 ? (JSON.parse(r.body) as T) : undefined;
}

/**
 * Nodes that are back (Ready, or renewing their Lease again: a kubelet that has reached the apiserver renews its Lease
 * before it posts Ready) and still carry an unreachable/not-ready NoExecute taint, or undefined when the nodes or
 * their Leases cannot be read. Their taints were added when they went silent, so their pods' tolerations count from
 * then: a taint-eviction controller started now could delete those pods at once, before the lifecycle controller
 * takes the taints off, and restarting the controller-manager stops the lifecycle controller that would have. A node
 * still down (not Ready, its Lease expired) keeps its taint and does not hold the revert.
 */
export async function backButTainted(ctx: Pick<ActionCtx, 'kube' | 'signal' | 'clock'>): Promise<string[] | undefined> {
  try {
    const [nodes, leases] = await Promise.all([
      list<NodeList>(ctx, '/api/v1/nodes'),
      list<LeaseList>(ctx, '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases'),
    ]);
    if (!nodes || !leases) return undefined;
    const now = ctx.clock.now();
    const renewing = new Set(
      (leases.items ?? [])
        .filter((l) => {
          const renewed = Date.parse(l.spec?.renewTime ?? '');
          return Number.isFinite(renewed) && now - renewed < (l.spec?.leaseDurationSeconds ?? 40) * 1000;
        })
        .map((l) => l.metadata?.name),
    );
    return (nodes.items ?? [])
      .filter((n) => n.spec?.taints?.some((t) => t.effect === 'NoExecute' && LIFECYCLE_TAINTS.has(t.key ?? '')))
      .filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') || renewing.has(n.metadata?.name))
      .map((n) => n.metadata?.name ?? '?')
      .sort();
  } catch {
    return undefined;
  }
}

/**
 * Waits until no node that is back (`backButTainted`) carries the lifecycle controller's NoExecute taints (it removes
 * them within a monitor period of seeing the node Ready), up to `timeoutMs`; throws TAINTS_REMAIN after that. It fails closed: nodes that
 * cannot be read are asked again until the same deadline, then TAINTS_UNKNOWN, since evicting again while such a
 * taint may remain could delete that node's pods at once.
 */
export async function waitForLifecycleTaintsGone(ctx: ActionCtx, timeoutMs: number, what: string): Promise<void> {
  const deadline = ctx.clock.now() + timeoutMs;
  for (;;) {
    const tainted = await backButTainted(ctx);
    if (tainted === undefined && ctx.clock.now() >= deadline)
      throw new KrError(
        'TAINTS_UNKNOWN',
        `${what}: the nodes could not be read for ${formatDuration(timeoutMs)} to check that no node that is back still carries the unreachable/not-ready NoExecute taint; ` +
          "evicting again could delete such a node's pods at once, so it stays as it is (`kube-runbook recover` tries again once the apiserver answers)",
        // a wait that has not succeeded yet: the revert is tried again until its own deadline
        { transient: 'nodes unreadable' },
      );
    if (tainted === undefined)
      ctx.log.warn(
        `${what}: cannot read the nodes or their Leases to check for NoExecute taints left on nodes that are back; asking again`,
      );
    else if (!tainted.length) return;
    else if (ctx.clock.now() >= deadline)
      throw new KrError(
        'TAINTS_REMAIN',
        `${what}: node(s) ${tainted.join(', ')}, back (Ready or renewing their Lease), still carry the unreachable/not-ready NoExecute taint after ${formatDuration(timeoutMs)}; ` +
          'evicting again now could delete their pods at once, so it stays as it is (check the node lifecycle controller, then `kube-runbook recover`)',
        { transient: 'taints remain' },
      );
    else ctx.log.info(`${what}: waiting for the NoExecute taints of node(s) ${tainted.join(', ')}, back, to be removed`);
    try {
      await ctx.clock.sleep(1000, ctx.signal);
    } catch (e) {
      throw new KrError('ABORTED', `${what}: stopped while waiting for taints to be removed: ${messageOf(e)}`);
    }
  }
}
