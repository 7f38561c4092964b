import { describe, expect, it } from 'vitest';
import { type ActionRecord, recordingAction } from '../testing/fake-modules.js';
import { startRemediatingRun } from '../testing/remediating-run.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { clearHalt, setHalt } from '../kube/halt.js';

const ops = (log: ActionRecord[], op: ActionRecord['op']) =>
  log.filter((r) => r.op === op).map((r) => `${r.action}@${r.node ?? 'cluster'}`);

describe('run: the halt', () => {
  it('rolls a running run back at once: its faults reverted, its remediation kept until rollback.waitFor holds', async () => {
    const h = await startRemediatingRun({ wait: '1h', within: '30m' });
    const { log, leases } = h;
    await h.trip();
    expect(ops(log, 'apply')).toEqual(['partition@node-1', 'freeze@cp-1']);

    await setHalt(h.ctx.kube, { by: 'alice@ops', reason: 'payments outage', clock: h.clock });
    const haltedAt = h.clock.now();
    await h.clock.runUntil(() => ops(log, 'revert').length > 0, 60_000);
    // the halt is read every second: the fault is reverted within a few, not at the end of the hour's wait
    expect(h.clock.now() - haltedAt).toBeLessThanOrEqual(5_000);
    expect(ops(log, 'revert')).toEqual(['partition@node-1']);
    // the remediation stays, as on a guard's abort, until the leases are fresh again
    await h.clock.advance(5 * 60_000);
    expect(ops(log, 'revert')).toEqual(['partition@node-1']);
    expect(h.events.some((e) => e.type === 'run-end')).toBe(false);
    leases.push('ok', 'all leases fresh');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(ops(log, 'revert')).toEqual(['partition@node-1', 'freeze@cp-1']);
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'halted', exitCode: 1, remaining: [] });
    expect(r.reason).toBe(
      'HALTED: halted by alice@ops since 2026-01-01T00:00:11.000000Z (Lease kube-system/kube-runbook-halt): payments outage',
    );
    expect(h.events.find((e) => e.type === 'rollback-start')).toMatchObject({ reason: r.reason });
  });

  it('refuses a new run in preflight (exit 3), naming who halted, when and why; resumed, the next run starts', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    await setHalt(kube, { by: 'alice@ops', reason: 'payments outage', clock });
    const runbook = baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '1m' }] });
    const log: ActionRecord[] = [];
    const refused = await startTestRun({ runbook, actions: [recordingAction('fault-a', log)], probes: [], clock, kube });
    await clock.runUntil(() => refused.events.some((e) => e.type === 'run-end'));
    const r = await refused.handle.result;
    expect(r).toMatchObject({ status: 'refused', exitCode: 3 });
    expect(r.reason).toContain(
      'halt: halted by alice@ops since 2026-01-01T00:00:00.000000Z (Lease kube-system/kube-runbook-halt): payments outage; no run starts until `kube-runbook resume`',
    );
    expect(log).toEqual([]);

    await clearHalt(kube, { by: 'alice@ops', clock });
    const next = await startTestRun({ runbook, actions: [recordingAction('fault-a', log)], probes: [], clock, kube, runId: 'run-next' });
    await clock.runUntil(() => next.events.some((e) => e.type === 'run-end'));
    expect((await next.handle.result).status).toBe('passed');
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
  });
});
