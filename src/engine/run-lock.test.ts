import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { RUN_LOCK_NAME } from './run-lock-lease.js';
import { ApiStatusError } from '../kube/source.js';

const runbook = baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '10m' }] });

/** A run of `runbook` on the cluster of `kube`, its action's calls recorded in `log`. */
const startLockRun = (clock: FakeClock, kube: ReturnType<typeof fakeKubeAccess>, runId: string, log: ActionRecord[] = []) =>
  startTestRun({ runbook, actions: [recordingAction('fault-a', log)], probes: [], clock, kube, runId });

/** A second run while `run-first` holds the lock: refused (exit 3) naming the holder, having applied nothing. */
async function refusedSecondRun(clock: FakeClock, kube: ReturnType<typeof fakeKubeAccess>) {
  const secondLog: ActionRecord[] = [];
  const second = await startLockRun(clock, kube, 'run-second', secondLog);
  await clock.runUntil(() => second.events.some((e) => e.type === 'run-end'));
  const r = await second.handle.result;
  expect(r).toMatchObject({ status: 'refused', exitCode: 3 });
  expect(r.reason).toContain(`another run holds the cluster-wide run lock (Lease kube-system/${RUN_LOCK_NAME}): run run-first (`);
  expect(secondLog).toEqual([]);
  return { second, reason: r.reason };
}

describe('run: the cluster-wide run lock', () => {
  it('a second run at once is refused (exit 3) naming the first one, and applies nothing; the lock is free again after the first ends', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const firstLog: ActionRecord[] = [];
    const first = await startLockRun(clock, kube, 'run-first', firstLog);
    await clock.runUntil(() => firstLog.some((r) => r.op === 'apply'));
    const lease = kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { holderIdentity: string; acquireTime: string } };
    expect(lease.spec.holderIdentity).toBe('run-first');

    const { second, reason } = await refusedSecondRun(clock, kube);
    expect(reason).toContain(`since ${lease.spec.acquireTime}`);
    expect(second.nodes.calls.filter((c) => !c.script.includes('kube-runbook-ok'))).toEqual([]);

    first.handle.interrupt();
    await clock.runUntil(() => first.events.some((e) => e.type === 'run-end'));
    expect((await first.handle.result).status).toBe('interrupted');
    const third = await startLockRun(clock, kube, 'run-third');
    await clock.runUntil(() => third.events.some((e) => e.type === 'fault-applied'));
    third.handle.interrupt();
    await clock.runUntil(() => third.events.some((e) => e.type === 'run-end'));
    expect((await third.handle.result).status).toBe('interrupted');
  });

  it('expires when its holder dies: a run whose holder stopped renewing is taken over after the lease duration', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const dead = await startLockRun(clock, kube, 'run-dead');
    await clock.runUntil(() => dead.events.some((e) => e.type === 'fault-applied'));
    // the holder vanishes (SIGKILL): its timers stop, nothing renews the lease any more
    const held = kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as {
      spec: { renewTime: string; leaseDurationSeconds: number };
    };
    expect(held.spec.leaseDurationSeconds).toBe(60 + 60); // faultTtl (1m) + 1m
    const frozen = JSON.parse(JSON.stringify(held)) as typeof held;
    const later = new FakeClock(Date.parse(frozen.spec.renewTime) + 121_000);
    kube.leases.set(`kube-system/${RUN_LOCK_NAME}`, frozen as never);
    const next = await startLockRun(later, kube, 'run-next');
    await later.runUntil(() => next.events.some((e) => e.type === 'fault-applied' || e.type === 'run-end'));
    expect(next.events.some((e) => e.type === 'fault-applied')).toBe(true);
    expect((kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { holderIdentity: string } }).spec.holderIdentity).toBe(
      'run-next',
    );
    next.handle.interrupt();
    await later.runUntil(() => next.events.some((e) => e.type === 'run-end'));
  });
});

type LockLease = {
  metadata: { annotations?: Record<string, string> };
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
};

describe('run: no lock released while something is applied', () => {
  const remediating = baseRunbook({
    guards: [{ probe: 'forecast', onViolation: 'remediate' }],
    steps: [{ action: 'partition', with: { nodes: { names: ['node-1'] } } }],
    remediation: [{ action: 'freeze', with: { nodes: 'control-plane' } }],
    rollback: { waitFor: { probe: 'leases' }, within: '1m' },
  });
  const modules = (log: ActionRecord[]) => [recordingAction('partition', log), recordingAction('freeze', log, { kind: 'remediation' })];
  const probes = () => [
    new ScriptedProbe('forecast', { status: 'violated', value: null, detail: 'eviction in 5s' }).probe,
    new ScriptedProbe('leases', { status: 'violated', value: null, detail: 'stale' }).probe,
  ];

  it('a run that leaves a remediation in place holds the lock until its timer has undone it: a second run is refused meanwhile, naming the holder and how to clear it', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const lease = () => kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as LockLease;
    const log: ActionRecord[] = [];
    const first = await startTestRun({ runbook: remediating, actions: modules(log), probes: probes(), clock, kube, runId: 'run-first' });
    await clock.runUntil(() => log.some((r) => r.op === 'apply' && r.action === 'freeze'));
    // the remediation's dead-man waits remediationTtl (1h by default): the lock outlasts it, should the executor die now
    expect(lease().spec.leaseDurationSeconds).toBe(3600 + 60);
    await clock.runUntil(() => first.events.some((e) => e.type === 'run-end'));
    expect(await first.handle.result).toMatchObject({
      status: 'rollback-incomplete',
      remaining: [expect.objectContaining({ action: 'freeze', node: 'cp-1' })],
    });
    // ended, the remediation left in place with its timer: the lock is held, by nobody alive, for as long
    expect(lease().spec.holderIdentity).toBe('run-first');
    expect(lease().metadata.annotations?.['kube-runbook/state']).toBe('left');
    expect(lease().spec.leaseDurationSeconds).toBe(3600 + 60);

    await clock.advance(30 * 60_000);
    const { reason } = await refusedSecondRun(clock, kube);
    expect(reason).toContain('it ended with faults or remediations still applied, each undone by its node-side timer');
    expect(reason).toContain('to clear it now: kube-runbook recover run-first');

    // once the remediation's timer has fired (1h after the run left it), the lock has expired too
    await clock.advance(31 * 60_000 + 1000);
    const third = await startLockRun(clock, kube, 'run-third');
    await clock.runUntil(() => third.events.some((e) => e.type === 'fault-applied' || e.type === 'run-end'));
    expect(third.events.some((e) => e.type === 'fault-applied')).toBe(true);
    third.handle.interrupt();
    await clock.runUntil(() => third.events.some((e) => e.type === 'run-end'));
  });

  it('a run that loses its lock (another run holds it now) aborts and rolls back', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const log: ActionRecord[] = [];
    const h = await startLockRun(clock, kube, 'run-lost', log);
    await clock.runUntil(() => h.events.some((e) => e.type === 'fault-applied'));
    const lease = kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as LockLease;
    lease.spec.holderIdentity = 'run-other';
    await clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'aborted', exitCode: 1, remaining: [] });
    expect(r.reason).toContain('lost the cluster-wide run lock');
    expect(log.map((x) => x.op)).toEqual(['prepare', 'apply', 'revert']);
    // not released: it is the other run's
    expect(lease.spec.holderIdentity).toBe('run-other');
  });

  it('a run whose lock cannot be renewed until it expires (the apiserver answers 503) aborts and rolls back; a blip does not', async () => {
    const clock = new FakeClock();
    const fake = fakeKubeAccess(clock, { context: 'lab' });
    let broken = false;
    const kube = {
      ...fake,
      json: <T>(path: string, o?: Parameters<NonNullable<typeof fake.json>>[1]): Promise<T> =>
        broken && path.includes('/leases/') && o?.method === 'PUT'
          ? Promise.reject(new ApiStatusError(503, 'the server is currently unable to handle the request'))
          : fake.json!<T>(path, o),
    };
    const log: ActionRecord[] = [];
    const h = await startLockRun(clock, kube, 'run-cut', log);
    await clock.runUntil(() => h.events.some((e) => e.type === 'fault-applied'));
    // 40 s of 503s: renewals retried, the lock (2 min) still held, the run goes on
    broken = true;
    await clock.advance(40_000);
    broken = false;
    await clock.advance(20_000);
    expect(h.events.some((e) => e.type === 'run-end')).toBe(false);
    expect(h.events.some((e) => e.type === 'attempt' && e.op === 'lock' && e.transient === 'apiserver 503')).toBe(true);
    broken = true;
    await clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'aborted', remaining: [] });
    expect(r.reason).toContain('lost the cluster-wide run lock');
    expect(r.reason).toContain('could not be renewed before it expired');
    expect(log.map((x) => x.op)).toEqual(['prepare', 'apply', 'revert']);
  });

  it('the lock is released at the end through an apiserver that answers 503 for a while (after an etcd fault, say)', async () => {
    const clock = new FakeClock();
    const fake = fakeKubeAccess(clock, { context: 'lab' });
    let failures = 0;
    const kube = {
      ...fake,
      json: <T>(path: string, o?: Parameters<NonNullable<typeof fake.json>>[1]): Promise<T> => {
        const releasing =
          path.includes(`/leases/${RUN_LOCK_NAME}`) &&
          o?.method === 'PUT' &&
          !(o.body as { spec: { holderIdentity?: string } }).spec.holderIdentity;
        if (releasing && failures < 3) {
          failures++;
          return Promise.reject(new ApiStatusError(503, 'the server is currently unable to handle the request'));
        }
        return fake.json!<T>(path, o);
      },
    };
    const h = await startLockRun(clock, kube, 'run-first');
    await clock.runUntil(() => h.events.some((e) => e.type === 'fault-applied'));
    h.handle.interrupt();
    await clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(failures).toBe(3);
    expect(h.events.filter((e) => e.type === 'attempt' && e.op === 'lock' && e.transient === 'apiserver 503')).toHaveLength(3);
    // free at once for the next run
    const next = await startLockRun(clock, kube, 'run-next');
    await clock.runUntil(() => next.events.some((e) => e.type === 'fault-applied'));
    next.handle.interrupt();
    await clock.runUntil(() => next.events.some((e) => e.type === 'run-end'));
    expect((await next.handle.result).status).toBe('interrupted');
  });
});
