import { describe, expect, it } from 'vitest';
import { ReportCollector } from '../report/collect.js';
import { renderJUnit } from '../report/junit.js';
import { renderTimeline } from '../report/timeline.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import type { ObjectiveEvent, RunEvent } from './events.js';
import { redactEvent } from './sinks.js';

const decided = (events: RunEvent[]) => events.filter((e): e is ObjectiveEvent => e.type === 'objective' && e.phase !== 'start');

/** A run that cuts node-1 off for 10 s; `leases` reads violated from the cut until the test says otherwise. */
async function cutRun(objectives: unknown[], o: { guard?: ScriptedProbe; steps?: unknown[]; perNode?: boolean } = {}) {
  const log: ActionRecord[] = [];
  const leases = new ScriptedProbe('leases', { status: 'ok', value: null, detail: 'all fresh' }, { perNode: o.perNode });
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

  it('per node: each node broken while the clock ran is timed from its start to its own recovery (p50, max, slowest)', async () => {
    const { h, leases, reverted } = await cutRun([{ name: 'leases fresh', probe: 'leases', holdFor: '1s', within: '30s' }], {
      perNode: true,
    });
    const notOk = (...names: string[]) => ({ notOk: names });
    // node-4 broke and recovered before the clock started: not counted
    leases.push('violated', 'stale', h.clock.now(), notOk('node-1', 'node-4'));
    await h.clock.advance(1000);
    leases.push('violated', 'stale', h.clock.now(), notOk('node-1', 'node-2', 'node-3'));
    const at = await reverted();
    await h.clock.advance(1000);
    leases.push('violated', 'stale', h.clock.now(), notOk('node-2', 'node-3'));
    // an unknown reading says nothing about the nodes
    await h.clock.advance(1000);
    leases.push('unknown', 'apiserver unreachable', h.clock.now());
    await h.clock.advance(1000);
    leases.push('violated', 'stale', h.clock.now(), notOk('node-3'));
    await h.clock.advance(4000);
    leases.push('ok', 'fresh', h.clock.now(), notOk());
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const collector = new ReportCollector();
    for (const e of h.events) collector.onEvent(redactEvent(e));
    const start = h.events.find((e): e is ObjectiveEvent => e.type === 'objective' && e.phase === 'start')!;
    const d = at - start.startedAt!;
    const [met] = decided(h.events);
    expect(met).toMatchObject({ phase: 'met', recoveryMs: 7000 + d });
    expect(met!.nodes).toEqual({
      recovered: 3,
      p50Ms: 3000 + d,
      maxMs: 7000 + d,
      slowest: 'node-3',
      notRecovered: 0,
      notRecoveredNames: [],
    });
    expect(met!.detail).toMatch(/; 3 node\(s\) recovered, p50 3(\.\d+)?s, max 7(\.\d+)?s \(node-3\)$/);
    expect(collector.report.objectives?.[0]?.nodes).toEqual(met!.nodes);
    // the timeline's objectives table and JUnit say it
    const html = renderTimeline(collector.report);
    expect(html).toContain('per node p50 / max');
    expect(html).toMatch(/3(\.\d+)?s \/ 7(\.\d+)?s \(3 node\(s\); slowest node-3\)/);
    expect(renderJUnit(collector.report)).toContain('3 node(s) recovered');
  });

  it('per node, missed: the nodes still not ok are named', async () => {
    const { h, leases, reverted } = await cutRun([{ name: 'leases fresh', probe: 'leases', holdFor: '1s', within: '5s' }], {
      perNode: true,
    });
    leases.push('violated', 'stale', h.clock.now(), { notOk: ['node-1', 'node-2'] });
    await reverted();
    await h.clock.advance(1000);
    leases.push('violated', 'stale', h.clock.now(), { notOk: ['node-2'] });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'), 100_000);
    const [missed] = decided(h.events);
    expect(missed).toMatchObject({ phase: 'missed', nodes: { recovered: 1, notRecovered: 1, notRecoveredNames: ['node-2'] } });
    expect(missed!.detail).toContain('1 not recovered: node-2');
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
    for (const e of h.events) collector.onEvent(redactEvent(e));
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

  it("a step's own objective: its clock starts when the last of that step's faults is reverted", async () => {
    const { h, leases } = await cutRun([], {
      steps: [
        {
          name: 'cut',
          action: 'cut',
          with: { nodes: { names: ['node-1', 'node-2'] } },
          objectives: [{ name: 'fresh after the cut', probe: 'leases', holdFor: '1s', within: '30s' }],
        },
        { name: 'hold', wait: '5s' },
        { name: 'heal', revert: 'cut' },
        { name: 'watch', wait: '20s' },
      ],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'step-start' && e.name === 'watch'));
    const reverts = h.events.filter((e) => e.type === 'fault-reverted').map((e) => e.at);
    expect(reverts).toHaveLength(2);
    await h.clock.advance(3000);
    leases.push('ok', 'fresh', h.clock.now());
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(await h.handle.result).toMatchObject({ status: 'passed', exitCode: 0 });
    const start = h.events.find((e): e is ObjectiveEvent => e.type === 'objective' && e.phase === 'start')!;
    expect(start).toMatchObject({
      name: 'fresh after the cut',
      startedAt: Math.max(...reverts),
      detail: 'the faults of step "cut" were reverted',
    });
    const [met] = decided(h.events);
    expect(met).toMatchObject({ name: 'fresh after the cut', phase: 'met' });
    // decided during the run's last step, not after it
    expect(met!.at).toBeLessThan(h.events.find((e) => e.type === 'step-end' && e.name === 'watch')!.at);
    expect(met!.recoveryMs).toBeGreaterThanOrEqual(3000);
  });

  it("a step's own objective whose step applied nothing is unmeasured", async () => {
    const guard = new ScriptedProbe('pods', { status: 'ok', value: null, detail: 'no deletions' });
    const { h, leases } = await cutRun([], {
      guard,
      steps: [
        { name: 'cut', action: 'cut', with: { nodes: { names: ['node-1'] } } },
        { wait: '10s' },
        {
          name: 'second cut',
          action: 'cut',
          with: { nodes: { names: ['node-2'] } },
          objectives: [{ name: 'fresh after the second cut', probe: 'leases', within: '1m' }],
        },
      ],
    });
    guard.push('violated', '1 pod deleted', h.clock.now());
    leases.push('ok', 'all fresh', h.clock.now());
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(decided(h.events)).toEqual([
      expect.objectContaining({ phase: 'unmeasured', detail: 'its clock never started: step "second cut" applied nothing' }),
    ]);
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
