import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { redact } from '../core/redact.js';
import type { RunReport } from '../report/collect.js';
import { renderJUnit } from '../report/junit.js';
import { renderTimeline } from '../report/timeline.js';

/** The report as it leaves the process: the same redaction as log lines (tokens, secret-looking keys), whole. */
export const redactedReport = (report: RunReport): RunReport => redact(report, Infinity) as RunReport;

/**
 * Writes report.json, junit.xml and timeline.html, readable by their owner only (0600, the directory 0700 when made
 * here): they hold nodes' stderr tails and revert scripts.
 */
export function writeReports(dir: string, report: RunReport): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const r = redactedReport(report);
  const write = (name: string, text: string) => writePrivate(join(dir, name), text);
  write('report.json', `${JSON.stringify(r, null, 2)}\n`);
  write('junit.xml', renderJUnit(r));
  write('timeline.html', renderTimeline(r));
}

/** Writes a file only its owner may read (0600), also over an existing one. */
export function writePrivate(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600); // the mode applies only to a new file
}
