import { readFileSync } from 'node:fs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { isKrError } from '../core/errors.js';
import { sampleReport as report } from '../testing/sample-report.js';
import { renderJUnit } from './junit.js';
import { parseReport } from './load.js';
import type { RunReport } from './collect.js';
import { Report, REPORT_VERSION } from './schema.js';
import { renderTimeline } from './timeline.js';

const failure = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (isKrError(e)) return { code: e.code, exit: e.exit, text: [e.message, ...e.details].join('\n') };
    throw e;
  }
  throw new Error('no error');
};

describe('a saved report read back', () => {
  it('is checked against a schema of the very shape runs write (npm run typecheck fails when one changes alone)', () => {
    expectTypeOf<z.infer<typeof Report>>().toEqualTypeOf<RunReport>();
    expect(Report.safeParse(report()).success).toBe(true);
  });

  it('renders the same timeline and JUnit as the run wrote', () => {
    const r = report();
    expect(r.reportVersion).toBe(REPORT_VERSION);
    const back = parseReport(JSON.stringify(r, null, 2), 'report.json');
    expect(renderTimeline(back)).toBe(renderTimeline(r));
    expect(renderJUnit(back)).toBe(renderJUnit(r));
  });

  it('reads a report written before reports had a version as version 1', () => {
    const { reportVersion: _v, ...old } = report();
    expect(parseReport(JSON.stringify(old), 'old.json').reportVersion).toBe(1);
  });

  it('refuses a newer reportVersion in one line, exit 2', () => {
    const f = failure(() => parseReport(JSON.stringify({ ...report(), reportVersion: REPORT_VERSION + 1 }), 'new.json'));
    expect(f).toEqual({
      code: 'REPORT_TOO_NEW',
      exit: 2,
      text: `new.json: reportVersion ${REPORT_VERSION + 1} is newer than this kube-runbook reads (${REPORT_VERSION}); render it with the kube-runbook that wrote it, or a newer one`,
    });
  });

  it('names the line, column and field of a value that is wrong', () => {
    const text = JSON.stringify({ ...report(), faults: [{ ...report().faults[0], status: 'gone' }] }, null, 2);
    const f = failure(() => parseReport(text, 'bad.json'));
    expect(f.code).toBe('REPORT_INVALID');
    expect(f.exit).toBe(2);
    const line = text.split('\n').findIndex((l) => l.includes('"status": "gone"')) + 1;
    expect(f.text).toMatch(new RegExp(`^bad\\.json:${line}:\\d+: faults\\[0\\]\\.status: .*"gone"`, 'm'));
  });

  it('names the line and column where the JSON breaks', () => {
    const f = failure(() => parseReport('{\n  "runId": "r-1",\n  "runbook": \n}\n', 'cut.json'));
    expect(f).toEqual({ code: 'REPORT_INVALID', exit: 2, text: 'cut.json: 1 problem\ncut.json:4:1: not JSON here: value expected' });
  });
});

describe('examples/reports/apiserver-outage, a report of a lab run', () => {
  const dir = new URL('../../examples/reports/apiserver-outage/', import.meta.url);
  const read = (name: string) => readFileSync(new URL(name, dir), 'utf8');

  it('reads back, and its timeline and JUnit are what kube-runbook report renders now', () => {
    const r = parseReport(read('report.json'), 'report.json');
    expect(r.objectives?.map((o) => o.status)).toEqual(['met', 'met', 'met']);
    const regenerate = 'out of date: run kube-runbook report report.json --html timeline.html --junit junit.xml in that directory';
    expect(renderTimeline(r) === read('timeline.html'), `timeline.html ${regenerate}`).toBe(true);
    expect(renderJUnit(r) === read('junit.xml'), `junit.xml ${regenerate}`).toBe(true);
  });

  it('renders when written before readings carried their numbers: the readings kept, no curves guessed from their values', () => {
    const old = JSON.parse(read('report.json')) as { steps: { readings?: unknown[] }[] };
    const value = { series: [{ labels: { job: 'kubelet' }, value: 3 }] };
    old.steps[0]!.readings = [{ at: '2026-12-02T10:00:00.000Z', status: 'ok', detail: '3 up', value }];
    const r = parseReport(JSON.stringify(old), 'report.json');
    expect(r.steps[0]!.readings).toEqual([{ at: '2026-12-02T10:00:00.000Z', status: 'ok', detail: '3 up', value }]);
    const page = renderTimeline(r);
    expect(page).toContain('<h2>Nodes</h2>');
    expect(page).not.toContain('<h2>Values read</h2>');
  });
});
