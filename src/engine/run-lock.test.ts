import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { type ActionRecord, recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { RUN_LOCK_NAME } from '../kube/run-lock.js';

const runbook = baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '10m' }] });

describe('run: the cluster-wide run lock', () => {
  it('a second run at once is refused (exit 3) naming the first one, and applies nothing; the lock is free again after the first ends', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const firstLog: ActionRecord[] = [];
    const first = await startTestRun({ runbook, actions: [recordingAction('fault-a', firstLog)], probes: [], clock, kube, runId: 'run-first' });
    await clock.runUntil(() => firstLog.some((r) => r.op === 'apply'));
    const lease = kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { holderIdentity: string; acquireTime: string } };
    expect(lease.spec.holderIdentity).toBe('run-first');

    const secondLog: ActionRecord[] = [];
    const second = await startTestRun({ runbook, actions: [recordingAction('fault-a', secondLog)], probes: [], clock, kube, runId: 'run-second' });
    await clock.runUntil(() => second.events.some((e) => e.type === 'run-end'));
    const r = await second.handle.result;
    expect(r).toMatchObject({ status: 'refused', exitCode: 3 });
    expect(r.reason).toContain(`another run holds the cluster-wide run lock (Lease kube-system/${RUN_LOCK_NAME}): run run-first (`);
    expect(r.reason).toContain(`since ${lease.spec.acquireTime}`);
    expect(secondLog).toEqual([]);
    expect(second.nodes.calls.filter((c) => !c.script.includes('kube-runbook-ok'))).toEqual([]);

    first.handle.interrupt();
    await clock.runUntil(() => first.events.some((e) => e.type === 'run-end'));
    expect((await first.handle.result).status).toBe('interrupted');
    const third = await startTestRun({ runbook, actions: [recordingAction('fault-a', [])], probes: [], clock, kube, runId: 'run-third' });
    await clock.runUntil(() => third.events.some((e) => e.type === 'fault-applied'));
    third.handle.interrupt();
    await clock.runUntil(() => third.events.some((e) => e.type === 'run-end'));
    expect((await third.handle.result).status).toBe('interrupted');
  });

  it('expires when its holder dies: a run whose holder stopped renewing is taken over after the lease duration', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const dead = await startTestRun({ runbook, actions: [recordingAction('fault-a', [])], probes: [], clock, kube, runId: 'run-dead' });
    await clock.runUntil(() => dead.events.some((e) => e.type === 'fault-applied'));
    // the holder vanishes (SIGKILL): its timers stop, nothing renews the lease any more
    const held = kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { renewTime: string; leaseDurationSeconds: number } };
    expect(held.spec.leaseDurationSeconds).toBe(60 + 60); // faultTtl (1m) + 1m
    const frozen = JSON.parse(JSON.stringify(held)) as typeof held;
    const later = new FakeClock(Date.parse(frozen.spec.renewTime) + 121_000);
    kube.leases.set(`kube-system/${RUN_LOCK_NAME}`, frozen as never);
    const next = await startTestRun({ runbook, actions: [recordingAction('fault-a', [])], probes: [], clock: later, kube, runId: 'run-next' });
    await later.runUntil(() => next.events.some((e) => e.type === 'fault-applied' || e.type === 'run-end'));
    expect(next.events.some((e) => e.type === 'fault-applied')).toBe(true);
    expect((kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { holderIdentity: string } }).spec.holderIdentity).toBe('run-next');
    next.handle.interrupt();
    await later.runUntil(() => next.events.some((e) => e.type === 'run-end'));
  });
});
