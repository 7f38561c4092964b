import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import { ProbeTester, rawLease } from '../testing/probe-tester.js';
import probe, { type LeaderValue } from './controller-manager.js';

let t: ProbeTester;
afterEach(async () => t.close());

const path = paths.leases('kube-system');
const renew = (holder: string) => t.api.put(path, rawLease('kube-system', 'kube-controller-manager', t.clock.now(), 15, holder));

describe('controller-manager', () => {
  it('is ok while the leader renews, counts renewals, violated once the lease runs out', async () => {
    t = new ProbeTester();
    renew('cp-1_a');
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('cp-1_a leads');
    for (let i = 0; i < 3; i++) {
      await t.advance(2000);
      renew('cp-1_a');
    }
    const stoppedAt = t.clock.now();
    const v = await run.until((r) => r.status === 'violated', 30_000);
    expect(v.at).toBe(stoppedAt + 15_001);
    expect(v.value).toMatchObject({ holder: 'cp-1_a', renewals: 3, transitions: 0 } satisfies Partial<LeaderValue>);
    expect(v.detail).toBe('no leader: cp-1_a last renewed 15.0s ago (lease 15s)');
  });

  it('counts leader changes and can be violated by them; no Lease at all is violated', async () => {
    t = new ProbeTester();
    const run = t.start(probe, { maxTransitions: 0 });
    const none = await run.until((r) => r.status === 'violated');
    expect(none.detail).toBe('no Lease kube-system/kube-controller-manager: no controller-manager has led');
    renew('cp-1_a');
    await run.until((r) => r.status === 'ok');
    await t.advance(1000);
    renew('cp-2_b');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.detail).toBe('cp-2_b leads, 1 leader change (more than 0)');
  });
});
