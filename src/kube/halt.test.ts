import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import type { FailedAttempt } from '../core/retry.js';
import { clearHalt, HALT_NAME, readHalt, setHalt } from './halt.js';

describe('the halt object', () => {
  it('is set with who, why and when, kept by a second halt, and cleared with who resumed and when', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock);
    expect(await readHalt(kube)).toEqual({ namespace: 'kube-system' });

    const set = await setHalt(kube, { by: 'alice@ops', reason: 'payments outage', clock });
    expect(set).toEqual({
      already: false,
      state: { namespace: 'kube-system', halt: { by: 'alice@ops', reason: 'payments outage', since: '2026-01-01T00:00:00.000000Z' } },
    });
    await clock.advance(60_000);
    const again = await setHalt(kube, { by: 'bob@ops', reason: 'me too', clock });
    expect(again.already).toBe(true);
    expect(again.state.halt?.by).toBe('alice@ops');

    const resumed = await clearHalt(kube, { by: 'carol@ops', clock });
    expect(resumed).toEqual({
      already: false,
      state: { namespace: 'kube-system', resumedBy: 'carol@ops', resumedAt: '2026-01-01T00:01:00.000000Z' },
    });
    expect(await readHalt(kube)).toEqual(resumed.state);
    expect((await clearHalt(kube, { by: 'dave@ops', clock })).already).toBe(true);
    expect(kube.leases.has(`kube-system/${HALT_NAME}`)).toBe(true);
  });

  it('is written through transient failures, and a write that cannot land is reported, after its bound', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock);
    kube.apiserver.mode = 'down';
    const failures: FailedAttempt[] = [];
    const setting = setHalt(kube, { by: 'alice@ops', reason: 'outage', clock, withinMs: 20_000, onFailure: (f) => failures.push(f) });
    await clock.advance(3_000);
    kube.apiserver.mode = 'up';
    await clock.runUntil(() => kube.leases.size > 0);
    expect((await setting).state.halt?.by).toBe('alice@ops');
    expect(failures.length).toBeGreaterThan(1);
    expect(failures[0]).toMatchObject({ transient: 'connection refusal' });

    kube.apiserver.mode = 'down';
    const clearing = clearHalt(kube, { by: 'bob@ops', clock, withinMs: 20_000 }).catch((e: unknown) => e);
    await clock.advance(25_000);
    const e = (await clearing) as { code: string; message: string };
    expect(e.code).toBe('HALT_NOT_WRITTEN');
    expect(e.message).toMatch(/^the resume was not written \(Lease kube-system\/kube-runbook-halt\): connect ECONNREFUSED/);
    kube.apiserver.mode = 'up';
    expect((await readHalt(kube)).halt?.by).toBe('alice@ops');
  });
});
