import { readFileSync } from 'node:fs';
import { parse, type TestCase, type TestSuites } from 'junit2json';
import { describe, expect, it } from 'vitest';
import type { FaultRef, RunEvent, RunStatus } from '../engine/events.js';
import { RUN_STATUS } from '../engine/events.js';
import { redactEvent } from '../engine/sinks.js';
import { ReportCollector } from './collect.js';
import { JUNIT_OUTCOME, renderJUnit } from './junit.js';

const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const at = (s: number) => T0 + s * 1000;
const iso = (s: number) => new Date(at(s)).toISOString();
const cut: FaultRef = { faultId: 'f01-cut', action: 'block-kubelet-egress', node: 'node-1', step: '1 cut node-1', remediation: false };
const freeze: FaultRef = { faultId: 'f02-freeze', action: 'stop-controller-manager', node: 'cp-1', step: 'remediation', remediation: true };

/** A run of 10 s: node-1 cut at 1 s, the forecast guard fires at 4 s with `response`, everything reverted by 9 s. */
function run(response: 'remediate' | 'abort' | 'warn', end: RunStatus): RunEvent[] {
  const stepStatus = response === 'abort' ? 'aborted' : 'passed';
  return [
    { type: 'run-start', at: at(0), runId: 'r-1', runbook: 'partition', context: 'lab', dryRun: false, journal: '/j' },
    { type: 'preflight', at: at(0), check: 'context', ok: true, detail: 'context "lab" is allowed' },
    { type: 'step-start', at: at(0), index: '1', name: 'cut node-1', kind: 'action' },
    { type: 'fault-applied', at: at(1), fault: cut },
    { type: 'step-end', at: at(1), index: '1', name: 'cut node-1', kind: 'action', status: 'passed', detail: 'applied on node-1' },
    { type: 'step-start', at: at(1), index: '2', name: 'hold', kind: 'wait' },
    { type: 'guard-fired', at: at(4), guard: 'eviction forecast', response, detail: 'first eviction in 9s' },
    ...(response === 'remediate' ? [{ type: 'fault-applied' as const, at: at(4.5), fault: freeze }] : []),
    { type: 'step-end', at: at(6), index: '2', name: 'hold', kind: 'wait', status: stepStatus, detail: 'held 5s' },
    { type: 'rollback-start', at: at(6), reason: 'steps done', faults: [cut, ...(response === 'remediate' ? [freeze] : [])] },
    { type: 'fault-reverted', at: at(7), fault: cut, attempts: 1, retried: [] },
    ...(response === 'remediate' ? [{ type: 'fault-reverted' as const, at: at(8), fault: freeze, attempts: 1, retried: [] }] : []),
    { type: 'rollback-end', at: at(9), complete: true, remaining: [] },
    {
      type: 'run-end',
      at: at(10),
      status: end,
      reason: response === 'abort' ? 'guard eviction forecast violated' : 'all steps passed',
      remaining: [],
    },
  ];
}

/** The JUnit of these events, read back by junit2json (xml2js underneath), as a CI's test report reader reads it. */
async function junitOf(events: RunEvent[]): Promise<TestSuites> {
  const c = new ReportCollector();
  for (const e of events) c.onEvent(redactEvent(e));
  return (await parse(renderJUnit(c.report))) as TestSuites;
}

const cases = (x: TestSuites): (TestCase & { properties?: { name?: string; value?: string }[] })[] => x.testsuite?.[0]?.testcase ?? [];
const props = (c: { properties?: { name?: string; value?: string }[] }) =>
  Object.fromEntries((c.properties ?? []).map((p) => [p.name, String(p.value)]));

describe('JUnit read by a JUnit parser', () => {
  it('a passing run whose guard remediated has no failure: the remediation is properties and output of its case', async () => {
    const x = await junitOf(run('remediate', 'passed'));
    expect([x.failures, x.errors, x.testsuite?.[0]?.failures, x.testsuite?.[0]?.errors]).toEqual([0, 0, 0, 0]);
    expect(cases(x).flatMap((c) => [...(c.failure ?? []), ...(c.error ?? [])])).toEqual([]);
    const fired = cases(x).find((c) => c.classname === 'partition.guards')!;
    expect(fired.name).toBe(`eviction forecast at ${iso(4)}`);
    expect(props(fired)).toEqual({
      guard: 'eviction forecast',
      response: 'remediate',
      firedAt: iso(4),
      'remediation.1': 'stop-controller-manager on cp-1',
      'remediation.1.appliedAt': iso(4.5),
      'remediation.1.undoneAt': iso(8),
    });
    expect(fired['system-out']?.[0]).toContain(`remediation stop-controller-manager on cp-1: applied at ${iso(4.5)}, undone at ${iso(8)}`);
    const outcome = cases(x).find((c) => c.classname === 'partition.run')!;
    expect(props(outcome)).toEqual({ status: 'passed', exitCode: '0' });
  });

  it('a warning is no failure either', async () => {
    const x = await junitOf(run('warn', 'passed'));
    expect([x.failures, x.errors]).toEqual([0, 0]);
    expect(cases(x).find((c) => c.classname === 'partition.guards')?.['system-out']?.[0]).toContain('fired warn');
  });

  it('an aborted run fails: the aborted step, the guard that aborted, and the outcome with its exit code', async () => {
    const x = await junitOf(run('abort', 'aborted'));
    expect(x.failures).toBe(3);
    expect(x.errors).toBe(0);
    const failed = cases(x).filter((c) => c.failure?.length);
    expect(failed.map((c) => [c.classname, c.name, c.failure?.[0]?.message])).toEqual([
      ['partition.run', 'outcome', 'aborted (exit 1)'],
      ['partition.steps', '2. hold', 'aborted'],
      ['partition.guards', `eviction forecast at ${iso(4)}`, 'abort'],
    ]);
    expect(failed[0]!.failure?.[0]?.inner).toBe('guard eviction forecast violated');
  });

  it('has failures or errors exactly when the exit code is not 0, for every run status', async () => {
    for (const status of Object.keys(RUN_STATUS) as RunStatus[]) {
      const x = await junitOf(run('warn', status));
      const outcome = cases(x).find((c) => c.name === 'outcome')!;
      expect([status, (x.failures ?? 0) + (x.errors ?? 0) > 0]).toEqual([status, RUN_STATUS[status] !== 0]);
      expect([status, outcome.failure?.length ? 'failure' : outcome.error?.length ? 'error' : 'pass']).toEqual([
        status,
        JUNIT_OUTCOME[status],
      ]);
      expect(props(outcome).exitCode).toBe(String(RUN_STATUS[status]));
    }
  });

  it('a report of a run that never ended is an error, not a pass', async () => {
    const x = await junitOf(run('warn', 'passed').filter((e) => e.type !== 'run-end'));
    expect(x.errors).toBeGreaterThan(0);
    expect(cases(x).find((c) => c.name === 'outcome')?.error?.[0]?.message).toBe('the run did not end (no run-end in the report)');
  });
});

describe('examples/reports/apiserver-outage/junit.xml, of a lab run that passed after a remediation', () => {
  it('has no failure, and says what the guard applied and when it was undone', async () => {
    const x = (await parse(
      readFileSync(new URL('../../examples/reports/apiserver-outage/junit.xml', import.meta.url), 'utf8'),
    )) as TestSuites;
    expect([x.failures, x.errors]).toEqual([0, 0]);
    const fired = cases(x).find((c) => c.classname === 'apiserver-outage.guards')!;
    expect(props(fired)).toMatchObject({ response: 'remediate', 'remediation.1': 'disable-taint-eviction on cp-1' });
    expect(props(fired)['remediation.1.undoneAt']).toMatch(/^2026-12-02T09:09:24/);
  });
});
