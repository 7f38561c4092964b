import { describe, expect, it } from 'vitest';
import { ReportCollector } from '../report/collect.js';
import { renderJUnit } from '../report/junit.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import type { ObjectiveEvent, RunEvent } from './events.js';

const decided = (events: RunEvent[]) => events.filter((e): e is ObjectiveEvent => e.type === 'objective' && e.phase !== 'start');

/** A run that cuts node-1 off for 10 s; `leases` reads violated from the cut until the test says otherwise. */
async function cutRun(objectives: unknown[], o: { guard?: ScriptedProbe; steps?: unknown[] } = {}) {
  const log: ActionRecord[] = [];
  const leases = new ScriptedProbe('leases', { status: 'ok', value: null, detail: 'all fresh' });
  const h = await startTestRun({
    runbook: baseRunbook({
      ...(o.guard ? { guards: [{ name: 'pods', probe: 'pods' }] } : {}),
      steps: o.steps ?? [
        { name: 'cut', action: 'cut', with: { nodes: { names: ['node-1'] } } },
        { name: 'hold', wait: '10s' },
      ],
      objectives,
    }),
    actions: [recordingAction('cut', log)],
    probes: [leases.probe, ...(o.guard ? [o.guard.probe] : [])],
  });
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'fault-applied'));
  leases.push('violated', 'node-1 stale', h.clock.now());
  const reverted = async () => {
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'rollback-end'));
    return h.clock.now();
  };
  return { h, leases, reverted };
}

describe('recovery objectives', () => {
  it("stop at the first ok reading that stays ok for holdFor, after the last fault's revert: met, the run passes", async () => {
    const { h, leases, reverted } = await cutRun([{ name: 'leases fresh', probe: 'leases', holdFor: '5s', within: '30s' }]);
    const at = await reverted();
    await h.clock.advance(2000);
    leases.push('ok', 'node-1 fresh again', h.clock.now());
    // a break before holdFor: the streak starts again
    await h.clock.advance(2000);
    leases.push('violated', 'node-1 stale', h.clock.now());
    await h.clock.advance(1000);
    leases.push('ok', 'node-1 fresh', h.clock.now());
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(await h.handle.result).toMatchObject({ status: 'passed', exitCode: 0 });
    const start = h.events.find((e): e is ObjectiveEvent => e.type === 'objective' && e.phase === 'start')!;
    expect(start.startedAt).toBeLessThanOrEqual(at);
    const [met] = decided(h.events);
    expect(met).toMatchObject({ name: 'leases fresh', phase: 'met' });
    // the streak that held began 5 s after the clock's start, give or take the rollback's last tick
    expect(met!.recoveryMs! - (at - start.startedAt!)).toBe(5000);
    expect(met!.at - (start.startedAt! + met!.recoveryMs!)).toBeGreaterThanOrEqual(5000);
  });

  it('a condition that never broke is met at once', async () => {
    const { h, leases, reverted } = await cutRun([{ name: 'web available', probe: 'leases', holdFor: '1s', within: '30s' }]);
    leases.push('ok', 'all fresh', h.clock.now());
    await reverted();
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(decided(h.events)).toEqual([expect.objectContaining({ phase: 'met', recoveryMs: 0 })]);
  });

  it('missed after within: the run ends objective-missed, exit 5, after a full rollback; JUnit fails that case', async () => {
    const { h, reverted } = await cutRun([
      { name: 'leases fresh', probe: 'leases', holdFor: '1s', within: '20s' },
      { name: 'from the hold', probe: 'leases', from: { step: 'hold' }, holdFor: '1s', within: '1m' },
    ]);
    const collector = new ReportCollector();
    await reverted();
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'), 200_000);
    for (const e of h.events) collector.onEvent(e);
    expect(await h.handle.result).toMatchObject({
      status: 'objective-missed',
      exitCode: 5,
      remaining: [],
      reason: 'recovery objectives missed: leases fresh, from the hold',
    });
    expect(decided(h.events).map((e) => `${e.name} ${e.phase}`)).toEqual(['leases fresh missed', 'from the hold missed']);
    // in the order their clocks started: the hold's first
    expect(collector.report.objectives).toEqual([
      expect.objectContaining({ name: 'from the hold', status: 'missed', withinMs: 60_000 }),
      expect.objectContaining({
        name: 'leases fresh',
        status: 'missed',
        withinMs: 20_000,
        detail: 'leases not ok within 20s (last reading violated: node-1 stale)',
      }),
    ]);
    const junit = renderJUnit(collector.report);
    expect(junit).toContain('<testcase classname="test.objectives" name="leases fresh" time="0.000"><failure message="objective missed">');
  });

  it("an objective whose step never ran is unmeasured, and does not change the run's outcome", async () => {
    const guard = new ScriptedProbe('pods', { status: 'ok', value: null, detail: 'no deletions' });
    const { h, leases } = await cutRun([{ name: 'after the second cut', probe: 'leases', from: { step: 'second cut' }, within: '1m' }], {
      guard,
      steps: [
        { name: 'cut', action: 'cut', with: { nodes: { names: ['node-1'] } } },
        { wait: '10s' },
        { name: 'second cut', action: 'cut', with: { nodes: { names: ['node-2'] } } },
      ],
    });
    guard.push('violated', '1 pod deleted', h.clock.now());
    leases.push('ok', 'all fresh', h.clock.now());
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(await h.handle.result).toMatchObject({ status: 'aborted', exitCode: 1 });
    expect(decided(h.events)).toEqual([
      expect.objectContaining({ phase: 'unmeasured', detail: 'its clock never started: step "second cut" did not run' }),
    ]);
  });

  it('an interrupt while the run waits for an objective ends the wait: unmeasured, exit 130', async () => {
    const { h, reverted } = await cutRun([{ name: 'leases fresh', probe: 'leases', within: '10m' }]);
    await reverted();
    await h.clock.advance(5000);
    h.handle.interrupt();
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(await h.handle.result).toMatchObject({ status: 'interrupted', exitCode: 130 });
    expect(decided(h.events)).toEqual([expect.objectContaining({ phase: 'unmeasured' })]);
  });
});
