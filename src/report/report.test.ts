import { describe, expect, it } from 'vitest';
import type { FaultRef, RunEvent } from '../engine/events.js';
import { LABEL_W, PLOT_W } from './axis.js';
import { ReportCollector, type Observation } from './collect.js';
import { renderJUnit } from './junit.js';
import { plainRenderer } from './plain.js';
import { renderTimeline } from './timeline.js';
import { redactEvent } from '../engine/sinks.js';
import evictionForecast from '../probes/eviction-forecast.js';
import nodeLeases from '../probes/node-leases.js';
import podDeletions from '../probes/pod-deletions.js';
import promql from '../probes/promql.js';
import workloadAvailability from '../probes/workload-availability.js';
import { guardReading, withFacts } from '../testing/reading-facts.js';

const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const HOSTILE = `<script>alert("x")</script> & 'co'`;
const partition: FaultRef = {
  faultId: 'f01-block-node-1',
  action: 'block-kubelet-egress',
  node: 'node-1',
  step: '1 cut node-1',
  remediation: false,
};
const freeze: FaultRef = {
  faultId: 'f02-freeze-cp-1',
  action: 'stop-controller-manager',
  node: 'cp-1',
  step: 'remediation',
  remediation: true,
  manualRevert: "start it: '$dir'/start",
};
const reading = (status: 'ok' | 'violated' | 'unknown', at: number, detail: string, value: unknown = null) => ({
  status,
  at,
  detail,
  value,
});

/**
 * A run of 10 s: node-1 cut off at 2 s, the forecast guard fires at 5 s, the partition is reverted at 6 s on the
 * third attempt, after two connection resets.
 */
function events(o: { freezeReverted: boolean }): RunEvent[] {
  const at = (s: number) => T0 + s * 1000;
  const predicted = {
    earliestEviction: { at: at(14), pod: 'demo/web-1', node: 'node-1' },
    atRisk: 2,
    frozen: false,
  };
  return [
    { type: 'run-start', at: at(0), runId: 'r-1', runbook: HOSTILE, context: 'lab', dryRun: false, journal: '/j' },
    { type: 'preflight', at: at(0), check: 'context', ok: true, detail: 'context "lab" is allowed' },
    { type: 'observation', at: at(0), name: 'pods deleted', reading: reading('unknown', at(0), 'listing') },
    withFacts(podDeletions.meta, {
      type: 'observation',
      at: at(0.5),
      name: 'pods deleted',
      reading: reading('ok', at(0.5), 'no pod deleted', { count: 0, deletions: [] }),
    }),
    {
      type: 'guard-reading',
      at: at(0.5),
      guard: 'eviction forecast',
      reading: reading('ok', at(0.5), 'no eviction predicted'),
      armed: true,
    },
    { type: 'guard-reading', at: at(1), guard: 'eviction forecast', reading: reading('ok', at(1), 'no eviction predicted'), armed: true },
    { type: 'step-start', at: at(1), index: '1', name: 'cut node-1', kind: 'action' },
    { type: 'fault-applied', at: at(2), fault: partition },
    { type: 'step-end', at: at(2), index: '1', name: 'cut node-1', kind: 'action', status: 'passed', detail: 'applied on node-1' },
    { type: 'step-start', at: at(2), index: '2', name: 'hold', kind: 'wait' },
    withFacts(evictionForecast.meta, {
      type: 'observation',
      at: at(4),
      name: 'eviction forecast',
      reading: reading('ok', at(4), 'first eviction in 10s', predicted),
    }),
    {
      type: 'guard-reading',
      at: at(5),
      guard: 'eviction forecast',
      reading: reading('violated', at(5), 'first eviction in 9s'),
      armed: true,
    },
    { type: 'guard-fired', at: at(5), guard: 'eviction forecast', response: 'abort', detail: 'first eviction in 9s' },
    { type: 'fault-applied', at: at(5.1), fault: freeze },
    {
      type: 'step-end',
      at: at(5.1),
      index: '2',
      name: 'hold',
      kind: 'wait',
      status: 'aborted',
      detail: 'guard eviction forecast violated',
    },
    { type: 'rollback-start', at: at(5.2), reason: 'guard eviction forecast violated', faults: [partition, freeze] },
    ...[1, 2].map((attempt) => ({
      type: 'attempt' as const,
      at: at(5.2 + attempt * 0.3),
      op: 'revert' as const,
      fault: partition,
      node: 'node-1',
      attempt,
      error: 'cannot reach node "node-1" over ssh (10.0.0.1): Connection reset by peer',
      transient: 'connection reset',
      retryInMs: 250 * attempt,
    })),
    { type: 'fault-reverted', at: at(6), fault: partition, attempts: 3, retried: ['connection reset', 'connection reset'] },
    withFacts(podDeletions.meta, {
      type: 'observation',
      at: at(7),
      name: 'pods deleted',
      reading: reading('violated', at(7), '1 pod deleted', {
        count: 1,
        deletions: [{ pod: 'demo/web-2', node: 'node-1', at: at(7), how: 'terminating', cause: 'taint-eviction' }],
      }),
    }),
    ...(o.freezeReverted
      ? [{ type: 'fault-reverted' as const, at: at(9), fault: freeze, attempts: 1, retried: [] }]
      : [{ type: 'fault-revert-failed' as const, at: at(9), fault: freeze, error: 'start failed', attempts: 1, retried: [] }]),
    { type: 'rollback-end', at: at(9.5), complete: o.freezeReverted, remaining: o.freezeReverted ? [] : [freeze] },
    {
      type: 'run-end',
      at: at(10),
      status: o.freezeReverted ? 'aborted' : 'rollback-incomplete',
      reason: 'guard eviction forecast violated',
      remaining: o.freezeReverted ? [] : [freeze],
      recoverCommand: o.freezeReverted ? undefined : 'kube-runbook recover r-1',
    },
  ];
}

function collect(o: { freezeReverted: boolean }) {
  const c = new ReportCollector();
  for (const e of events(o)) c.onEvent(redactEvent(e));
  return c.report;
}

describe('report collector', () => {
  it('folds the events into steps, faults with their times, guard changes, firings, the rollback and observations', () => {
    const r = collect({ freezeReverted: true });
    expect(r).toMatchObject({ runId: 'r-1', status: 'aborted', durationMs: 10_000, remaining: [] });
    expect(r.steps.map((s) => [s.index, s.status])).toEqual([
      ['1', 'passed'],
      ['2', 'aborted'],
    ]);
    expect(r.faults.map((f) => [f.faultId, f.status, f.appliedAt, f.revertedAt])).toEqual([
      ['f01-block-node-1', 'reverted', '2026-11-22T10:00:02.000Z', '2026-11-22T10:00:06.000Z'],
      ['f02-freeze-cp-1', 'reverted', '2026-11-22T10:00:05.100Z', '2026-11-22T10:00:09.000Z'],
    ]);
    // a reading that repeats the status is not a change
    expect(r.guardTransitions.map((g) => g.status)).toEqual(['ok', 'violated']);
    expect(r.guardFirings).toEqual([
      { at: '2026-11-22T10:00:05.000Z', guard: 'eviction forecast', response: 'abort', detail: 'first eviction in 9s' },
    ]);
    expect(r.rollback).toEqual({
      startedAt: '2026-11-22T10:00:05.200Z',
      endedAt: '2026-11-22T10:00:09.500Z',
      reason: 'guard eviction forecast violated',
      complete: true,
    });
    expect(r.faults[0]).toMatchObject({ attempts: 3, retried: ['connection reset', 'connection reset'] });
    expect(r.attempts.map((a) => [a.at, a.faultId, a.attempt, a.transient, a.retryInMs])).toEqual([
      ['2026-11-22T10:00:05.500Z', 'f01-block-node-1', 1, 'connection reset', 250],
      ['2026-11-22T10:00:05.800Z', 'f01-block-node-1', 2, 'connection reset', 500],
    ]);
    const pods = r.observations['pods deleted'] as Observation;
    expect(pods.history.map((h) => h.status)).toEqual(['unknown', 'ok', 'violated']);
    expect(pods.detail).toBe('1 pod deleted');
  });

  it('keeps a fault whose revert failed as revert-failed, with the error', () => {
    const r = collect({ freezeReverted: false });
    expect(r.faults[1]).toMatchObject({ faultId: 'f02-freeze-cp-1', status: 'revert-failed', error: 'start failed' });
    expect(r.rollback?.complete).toBe(false);
    expect(r.remaining.map((f) => f.faultId)).toEqual(['f02-freeze-cp-1']);
  });
});

describe('plain log', () => {
  it('says each retried attempt, and on which attempt a revert went through', () => {
    const lines: string[] = [];
    const render = plainRenderer((l) => lines.push(l));
    for (const e of events({ freezeReverted: true })) render(redactEvent(e));
    expect(lines).toContain(
      '10:00:05.500   attempt 1 to revert block-kubelet-egress on node-1 failed (connection reset): cannot reach node "node-1" over ssh (10.0.0.1): Connection reset by peer; retrying in 250ms',
    );
    expect(lines).toContain('10:00:06.000   reverted block-kubelet-egress on node-1 on attempt 3 after 2 connection resets');
    expect(lines).toContain('10:00:09.000   reverted stop-controller-manager on cp-1');
  });
});

describe('JUnit', () => {
  it('fails the outcome, the aborted step, the guard that aborted, and the rollback only when something remains', () => {
    const ok = renderJUnit(collect({ freezeReverted: true }));
    expect(ok).toContain('tests="5" failures="3" errors="0"');
    expect(ok).toContain('name="2. hold" time="3.100"><failure message="aborted">guard eviction forecast violated</failure>');
    expect(ok).toContain(
      'name="every fault reverted"><system-out>block-kubelet-egress on node-1 reverted on attempt 3 after 2 connection resets</system-out></testcase>',
    );
    expect(ok).not.toContain('<script>');
    expect(ok).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;');
    const left = renderJUnit(collect({ freezeReverted: false }));
    expect(left).toContain('<failure message="rollback incomplete">stop-controller-manager on cp-1\nkube-runbook recover r-1</failure>');
  });
});

describe('HTML timeline', () => {
  const rect = (html: string, title: RegExp) => {
    const m = [...html.matchAll(/<rect class="([^"]+)" x="([\d.]+)" y="\d+" width="([\d.]+)" height="\d+"><title>([^<]*)<\/title>/g)].find(
      (x) => title.test(x[4]!),
    );
    return m ? { cls: m[1], x: Number(m[2]), width: Number(m[3]) } : undefined;
  };

  it('has a lane for every step, fault, guard and observer, and escapes every text from the run', () => {
    const html = renderTimeline(collect({ freezeReverted: true }));
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).not.toMatch(/<script/i);
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    for (const label of [
      '1. cut node-1',
      '2. hold',
      'rollback',
      'block-kubelet-egress on node-1',
      'stop-controller-manager on cp-1 (remediation)',
      'eviction forecast',
      'pods deleted',
    ])
      expect(html).toContain(`<title>${label}</title>`);
    expect(html).toContain('ABORTED');
    expect(html).not.toContain('Still applied');
  });

  it('places bars on one time axis: the partition from 2 s to 6 s of a run whose axis reaches the predicted eviction at 14 s', () => {
    const html = renderTimeline(collect({ freezeReverted: true }));
    // the forecast predicted the first eviction at 14 s, after the run's end: the axis runs to it
    const bar = rect(html, /^applied 10:00:02.000, reverted 10:00:06.000 \(4s\) on attempt 3 after 2 connection resets$/);
    expect(bar?.cls).toBe('fault');
    expect(bar?.x).toBeCloseTo(LABEL_W + (2 / 14) * PLOT_W, 0);
    expect(bar?.width).toBeCloseTo((4 / 14) * PLOT_W, 0);
    expect(html).toContain('<title>predicted at 10:00:04.000: demo/web-1 on node-1 evicted at 10:00:14.000</title>');
    expect(html).toContain('<title>10:00:07.000 demo/web-2 on node-1 deleted (taint-eviction)</title>');
    expect(html).toContain('<title>10:00:05.000 fired → abort: first eviction in 9s</title>');
    const violated = rect(html, /^violated: first eviction in 9s/);
    expect(violated?.cls).toBe('reading-violated');
    // from the guard's violation to the end of the run
    expect(violated?.width).toBeCloseTo((5 / 14) * PLOT_W, 0);
    // each failed attempt is a mark on its fault's lane, and a row of the retries table
    expect(html).toContain(
      '<title>10:00:05.800 attempt 2 to revert block-kubelet-egress on node-1 failed (connection reset): cannot reach node &quot;node-1&quot; over ssh (10.0.0.1): Connection reset by peer; retrying in 500ms</title>',
    );
    expect(html).toContain('<td>reverted on attempt 3 after 2 connection resets</td>');
    expect(html).toContain('<h2>Retried after failures</h2>');
    // the pods table names the deletion and its cause
    expect(html).toMatch(/<td>demo\/web-2<\/td><td>node-1<\/td><td>taint-eviction<\/td>/);
  });

  it('puts what is still applied first, in red, with the command that removes it', () => {
    const html = renderTimeline(collect({ freezeReverted: false }));
    const still = html.indexOf('Still applied');
    expect(still).toBeGreaterThan(0);
    expect(still).toBeLessThan(html.indexOf('<h2>Steps</h2>'));
    expect(html).toContain('<code>kube-runbook recover r-1</code>');
    expect(html).toContain('<pre>start it: &#39;$dir&#39;/start</pre>');
    expect(rect(html, /^STILL APPLIED \(revert-failed\): start failed/)?.cls).toBe('remaining');
  });
});

describe('report.json: the values probes read', () => {
  it('keeps every reading of each guard and of each expect step, values included, with the numbers their probes declare', () => {
    const c = new ReportCollector();
    const series = (v: number) => ({ series: [{ labels: { quantile: '0.99' }, value: v }] });
    const evs: RunEvent[] = [
      { type: 'run-start', at: T0, runId: 'r-2', runbook: 'rb', context: 'lab', dryRun: false, journal: '/j' },
      guardReading(promql.meta, 'fsync p99', T0 + 1000, reading('ok', T0 + 1000, '0.01 (< 0.5)', series(0.01))),
      { type: 'step-start', at: T0 + 1000, index: '1', name: 'steady state', kind: 'expect' },
      withFacts(workloadAvailability.meta, {
        type: 'step-reading',
        at: T0 + 1500,
        index: '1',
        reading: reading('unknown', T0 + 1500, 'waiting', null),
      }),
      withFacts(workloadAvailability.meta, {
        type: 'step-reading',
        at: T0 + 2000,
        index: '1',
        reading: reading('ok', T0 + 2000, '3/3 ready', { ready: 3, wanted: 3, items: [] }),
      }),
      { type: 'step-end', at: T0 + 2000, index: '1', name: 'steady state', kind: 'expect', status: 'passed', detail: 'ok: 3/3 ready' },
      guardReading(promql.meta, 'fsync p99', T0 + 3000, reading('violated', T0 + 3000, '0.8 not < 0.5', series(0.8))),
    ];
    for (const e of evs) c.onEvent(redactEvent(e));
    expect(c.report.guardReadings['fsync p99']?.map((r) => r.value)).toEqual([series(0.01), series(0.8)]);
    expect(c.report.guardReadings['fsync p99']?.map((r) => r.numbers)).toEqual([
      { '{quantile="0.99"}': 0.01 },
      { '{quantile="0.99"}': 0.8 },
    ]);
    expect(c.report.steps[0]?.readings).toEqual([
      { at: new Date(T0 + 1500).toISOString(), status: 'unknown', detail: 'waiting', value: null },
      {
        at: new Date(T0 + 2000).toISOString(),
        status: 'ok',
        detail: '3/3 ready',
        value: { ready: 3, wanted: 3, items: [] },
        numbers: { ready: 3, wanted: 3 },
      },
    ]);
  });

  it("keeps the numbers of no probe that declares none, though its value looks like PromQL's or ready counts", () => {
    const c = new ReportCollector();
    const value = { series: [{ labels: {}, value: 1 }], ready: 3, wanted: 3, items: [], met: 1, total: 1, objects: [] };
    c.onEvent(redactEvent({ type: 'guard-reading', at: T0, guard: 'g', reading: reading('ok', T0, 'ok', value), armed: true }));
    expect(c.report.guardReadings['g']?.[0]).not.toHaveProperty('numbers');
    expect(renderTimeline(c.report)).not.toContain('<h2>Values read</h2>');
  });

  it("keeps the first 100 entries of a long list in a reading's value and counts the rest (a node-leases reading over 5,000 nodes)", () => {
    const c = new ReportCollector();
    const nodes = Array.from({ length: 5000 }, (_, i) => ({ name: `n-${i}`, ageMs: 1000, stale: i === 4321 }));
    const value = { nodes, stale: ['n-4321'] };
    c.onEvent(redactEvent(guardReading(nodeLeases.meta, 'leases', T0, reading('violated', T0, '1/5000 leases stale: n-4321 41s', value))));
    const kept = c.report.guardReadings['leases']?.[0]?.value as Record<string, unknown>;
    expect(kept.nodes).toEqual(nodes.slice(0, 100));
    expect(kept.nodesLeftOut).toBe(4900);
    expect(kept.stale).toEqual(['n-4321']);
    expect(kept).not.toHaveProperty('staleLeftOut');
    // the probe's own value is not changed, and the report's node lanes still read it whole
    expect(value.nodes).toHaveLength(5000);
    expect(c.report.nodes.map((n) => n.node)).toContain('n-4321');
  });
});
