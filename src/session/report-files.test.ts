import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ReportCollector } from '../report/collect.js';
import { writeReports } from './report-files.js';
import { redactEvent } from '../engine/sinks.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-report-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('writeReports', () => {
  it('writes the reports readable by their owner only, with tokens redacted as in logs', () => {
    const c = new ReportCollector();
    c.onEvent(redactEvent({ type: 'run-start', at: 0, runId: 'r1', runbook: 'rb', context: 'lab', dryRun: false, journal: '' }));
    c.onEvent(
      redactEvent({
        type: 'preflight',
        at: 1,
        check: 'cluster',
        ok: false,
        detail: 'curl -H "Authorization: Bearer abcdefghijklmnop123" failed; eyJhbGciOiJ.eyJzdWIiOiJ.c2lnbmF0dXJl',
      }),
    );
    const out = join(dir, 'reports');
    writeReports(out, c.report);
    expect(statSync(out).mode & 0o777).toBe(0o700);
    for (const name of ['report.json', 'junit.xml', 'timeline.html']) {
      expect(statSync(join(out, name)).mode & 0o777, name).toBe(0o600);
      const text = readFileSync(join(out, name), 'utf8');
      expect(text, name).not.toContain('abcdefghijklmnop123');
      expect(text, name).not.toContain('eyJhbGciOiJ.eyJzdWIiOiJ');
    }
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toContain('Bearer [redacted]');
    // an existing world-readable file is made private too
    writeFileSync(join(out, 'junit.xml'), 'old', { mode: 0o644 });
    writeReports(out, c.report);
    expect(statSync(join(out, 'junit.xml')).mode & 0o777).toBe(0o600);
  });
});
