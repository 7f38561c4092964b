import { afterEach, describe, expect, it } from 'vitest';
import { resolveAccess } from '../contract/access.js';
import { paths } from '../kube/resources.js';
import { ProbeTester, rawLease } from '../testing/probe-tester.js';
import probe, { type LeaderElectionValue } from './leader-election.js';

let t: ProbeTester;
afterEach(async () => t.close());

const renew = (name: string, holder: string) =>
  t.api.put(paths.leases('kube-system'), rawLease('kube-system', name, t.clock.now(), 15, holder));
const KCM = 'kube-controller-manager';
const SCHED = 'kube-scheduler';

describe('leader-election', () => {
  it('is ok while both leaders renew; violated once one renewal is older than maxRenewAge, before its Lease runs out', async () => {
    t = new ProbeTester();
    renew(KCM, 'cp-1_a');
    renew(SCHED, 'cp-1_b');
    const schedulerLast = t.clock.now();
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('kube-controller-manager: cp-1_a leads; kube-scheduler: cp-1_b leads');
    // the controller-manager renews every 2 s, then once 5 s late; the scheduler stops renewing
    for (let i = 0; i < 3; i++) {
      await t.advance(2000);
      renew(KCM, 'cp-1_a');
    }
    await t.advance(7000);
    renew(KCM, 'cp-1_a');
    const late = await run.until((r) => r.status === 'violated', 30_000);
    // judged the moment the scheduler's renewal turned 10 s old, not at the next event
    expect(late.at).toBe(schedulerLast + 10_001);
    expect(late.detail).toBe('kube-scheduler: cp-1_b renewed 10.0s ago (more than 10s); kube-controller-manager: cp-1_a leads');
    const lease = (r: typeof late, name: string) => (r.value as LeaderElectionValue).leases.find((l) => l.lease === `kube-system/${name}`);
    expect(lease(late, KCM)).toMatchObject({ holder: 'cp-1_a', renewals: 3, transitions: 0 });
    expect(lease(late, SCHED)).toMatchObject({ holder: 'cp-1_b', renewals: 0, maxRenewGapMs: null });
    const gone = await run.until((r) => r.detail.startsWith('kube-scheduler: no leader'), 30_000);
    expect(gone.at).toBe(schedulerLast + 15_001);
    expect(gone.detail).toMatch(/^kube-scheduler: no leader \(cp-1_b last renewed it 15\.0s ago\); /);
    // the controller-manager's late renewal is its longest gap
    expect(lease(gone, KCM)).toMatchObject({ renewals: 4, maxRenewGapMs: 7000 });
  });

  it('reads a Lease its leader released (no holder) as no leader at once', async () => {
    t = new ProbeTester();
    renew(KCM, 'cp-1_a');
    renew(SCHED, 'cp-1_b');
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    await t.advance(1000);
    renew(SCHED, '');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.detail).toBe('kube-scheduler: no leader (released 0ms ago); kube-controller-manager: cp-1_a leads');
  });

  it('with maxLeaderless, a released Lease is a handover for that long: ok once the next leader takes it, lost if none does', async () => {
    t = new ProbeTester();
    renew(KCM, 'cp-2_a');
    renew(SCHED, 'cp-2_b');
    const run = t.start(probe, { maxLeaderless: '5s' });
    await run.until((r) => r.status === 'ok');
    await t.advance(1000);
    renew(SCHED, '');
    const handing = await run.until((r) => r.detail.includes('kube-scheduler: released'));
    expect(handing.status).toBe('ok');
    expect(handing.detail).toBe('kube-controller-manager: cp-2_a leads; kube-scheduler: released 0ms ago, being handed over');
    await t.advance(2000);
    renew(SCHED, 'cp-1_b');
    const taken = await run.until((r) => r.detail.includes('cp-1_b leads'));
    expect(taken.status).toBe('ok');
    // the controller-manager's leader gives up too, and nobody takes it: lost the moment its grace ends
    renew(KCM, '');
    const releasedAt = t.clock.now();
    for (let i = 0; i < 6; i++) {
      await t.advance(1000);
      renew(SCHED, 'cp-1_b');
    }
    const lost = await run.until((r) => r.status === 'violated', 30_000);
    expect(lost.at).toBe(releasedAt + 5000);
    expect(lost.detail).toBe('kube-controller-manager: no leader (released 5s ago); kube-scheduler: cp-1_b leads, 1 leader change');
  });

  it('counts leader changes against maxTransitions; a missing Lease is violated', async () => {
    t = new ProbeTester();
    renew(KCM, 'cp-1_a');
    const run = t.start(probe, { leases: [`kube-system/${KCM}`, 'kube-system/missing'], maxTransitions: 0 });
    const missing = await run.until((r) => r.status === 'violated');
    expect(missing.detail).toBe('missing: no Lease kube-system/missing; kube-controller-manager: cp-1_a leads');
    t.api.put(paths.leases('kube-system'), rawLease('kube-system', 'missing', t.clock.now(), 15, 'x'));
    await run.until((r) => r.status === 'ok');
    await t.advance(1000);
    renew(KCM, 'cp-2_b');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.detail).toBe('kube-controller-manager: cp-2_b leads, 1 leader change (more than 0); missing: x leads');
  });

  it('needs to watch Leases in the namespace of each one it is given', () => {
    const params = probe.meta.params.parse({ leases: ['kube-system/kube-controller-manager', 'other/lock'] });
    expect(
      resolveAccess(probe.meta.access, params as Record<string, unknown>).map((a) => ('namespace' in a ? a.namespace : undefined)),
    ).toEqual(['kube-system', 'other']);
  });

  it('refuses a lease that is not namespace/name', () => {
    expect(probe.meta.params.safeParse({ leases: ['kube-controller-manager'] }).success).toBe(false);
    expect(probe.meta.params.safeParse({ leases: [] }).success).toBe(false);
  });
});
