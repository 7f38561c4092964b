import { describe, expect, it } from 'vitest';
import type { ActionCtx } from '../../contract/context.js';
import { memoryLogger } from '../../core/logger.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { backButTainted, waitForLifecycleTaintsGone } from './stale-taints.js';

const node = (name: string, ready: 'True' | 'False' | 'Unknown', taint?: string) => ({
  metadata: { name },
  spec: taint ? { taints: [{ key: taint, effect: 'NoExecute' }] } : {},
  status: { conditions: [{ type: 'Ready', status: ready }] },
});

/** A node's Lease renewed `agoMs` before `now` (lease duration 40 s). */
const lease = (name: string, now: number, agoMs: number) => ({
  metadata: { name },
  spec: { renewTime: new Date(now - agoMs).toISOString(), leaseDurationSeconds: 40 },
});

function ctxWith(
  nodes: () => unknown[] | undefined,
  leases: (now: number) => unknown[] | undefined = () => [],
): { ctx: ActionCtx; clock: FakeClock } {
  const clock = new FakeClock();
  const kube = {
    raw: async (path: string) => {
      const items = path.includes('/leases') ? leases(clock.now()) : nodes();
      return items ? { status: 200, body: JSON.stringify({ items }) } : { status: 503, body: 'unavailable' };
    },
  };
  return { clock, ctx: { clock, log: memoryLogger(), signal: new AbortController().signal, kube } as unknown as ActionCtx };
}

/** The wait still waits 3 s in, and goes on within 5 s once `change` has happened. */
async function goesOnOnce(ctx: ActionCtx, clock: FakeClock, change: () => void): Promise<void> {
  let done = false;
  void waitForLifecycleTaintsGone(ctx, 60_000, 'test').then(() => (done = true));
  await clock.advance(3000);
  expect(done).toBe(false);
  change();
  expect(await clock.runUntil(() => done, 5000)).toBe(true);
}

describe('NoExecute taints left on nodes that are back', () => {
  it('names nodes back (Ready, or renewing their Lease before they post Ready) that still carry the taint, not the ones still down', async () => {
    const { ctx } = ctxWith(
      () => [
        node('node-1', 'True', 'node.kubernetes.io/unreachable'),
        node('node-2', 'Unknown', 'node.kubernetes.io/unreachable'),
        node('node-3', 'True', 'node.kubernetes.io/not-ready'),
        node('node-4', 'True', 'example.com/dedicated'),
        node('node-5', 'True'),
        // its kubelet reached the apiserver again: Lease renewed, Ready still the controller's Unknown
        node('node-6', 'Unknown', 'node.kubernetes.io/unreachable'),
      ],
      (now) => [lease('node-2', now, 60_000), lease('node-6', now, 1000)],
    );
    expect(await backButTainted(ctx)).toEqual(['node-1', 'node-3', 'node-6']);
  });

  it('waits while a node renews its Lease but is not Ready yet, until its taint is taken off', async () => {
    let tainted = true;
    const { ctx, clock } = ctxWith(
      () => [node('node-1', 'Unknown', tainted ? 'node.kubernetes.io/unreachable' : undefined)],
      (now) => [lease('node-1', now, 500)],
    );
    await goesOnOnce(ctx, clock, () => (tainted = false));
  });

  it('fails closed when the Leases cannot be read', async () => {
    const { ctx, clock } = ctxWith(
      () => [node('node-1', 'True')],
      () => undefined,
    );
    let error: unknown;
    void waitForLifecycleTaintsGone(ctx, 10_000, 'disable-taint-eviction revert').catch((e: unknown) => (error = e));
    await clock.runUntil(() => error !== undefined, 30_000);
    expect(error).toMatchObject({ code: 'TAINTS_UNKNOWN' });
  });

  it('waits until the lifecycle controller has taken them off', async () => {
    let tainted = true;
    const { ctx, clock } = ctxWith(() => [node('node-1', 'True', tainted ? 'node.kubernetes.io/unreachable' : undefined)]);
    await goesOnOnce(ctx, clock, () => (tainted = false));
  });

  it('refuses to go on when they stay past the timeout', async () => {
    const { ctx, clock } = ctxWith(() => [node('node-1', 'True', 'node.kubernetes.io/unreachable')]);
    let error: unknown;
    void waitForLifecycleTaintsGone(ctx, 10_000, 'disable-taint-eviction revert').catch((e: unknown) => (error = e));
    await clock.runUntil(() => error !== undefined, 30_000);
    expect(error).toMatchObject({
      code: 'TAINTS_REMAIN',
      message: expect.stringContaining(
        'node(s) node-1, back (Ready or renewing their Lease), still carry the unreachable/not-ready NoExecute taint after 10s',
      ),
    });
  });

  it('fails closed when the nodes cannot be read: asks again until the deadline, then refuses', async () => {
    const { ctx, clock } = ctxWith(() => undefined);
    let error: unknown;
    void waitForLifecycleTaintsGone(ctx, 10_000, 'disable-taint-eviction revert').catch((e: unknown) => (error = e));
    await clock.advance(5000);
    expect(error).toBeUndefined();
    await clock.runUntil(() => error !== undefined, 30_000);
    expect(error).toMatchObject({ code: 'TAINTS_UNKNOWN', message: expect.stringContaining('the nodes could not be read for 10s') });
  });

  it('goes on once the nodes can be read again and carry no such taint', async () => {
    let readable = false;
    const { ctx, clock } = ctxWith(() => (readable ? [node('node-1', 'True')] : undefined));
    await goesOnOnce(ctx, clock, () => (readable = true));
  });
});
