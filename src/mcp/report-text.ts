import { formatDuration } from '../core/duration.js';
import type { RunReport } from '../report/collect.js';
import { reportSummary } from '../report/summary.js';

const where = (f: { action: string; node?: string }) => `${f.action}${f.node ? ` on ${f.node}` : ''}`;

/** The run's moments in time order: steps, guard firings, faults applied and reverted, the rollback, warnings. */
function timeline(r: RunReport): string[] {
  const at: [string, string][] = [];
  for (const p of r.preflight) if (!p.ok) at.push([r.startedAt, `preflight ${p.check} FAILED: ${p.detail}`]);
  for (const s of r.steps) {
    at.push([s.startedAt, `step ${s.index} ${s.name} (${s.kind}) started`]);
    if (s.endedAt) at.push([s.endedAt, `step ${s.index} ${s.name}: ${s.status ?? 'ended'}${s.detail ? `: ${s.detail}` : ''}`]);
  }
  for (const g of r.guardFirings) at.push([g.at, `guard ${g.guard} fired (${g.response}): ${g.detail}`]);
  for (const f of r.faults) {
    if (f.appliedAt) at.push([f.appliedAt, `applied ${where(f)}`]);
    if (f.revertedAt) at.push([f.revertedAt, `reverted ${where(f)}${f.attempts && f.attempts > 1 ? ` (attempt ${f.attempts})` : ''}`]);
    if (f.error) at.push([f.revertedAt ?? f.appliedAt ?? r.startedAt, `${f.status} ${where(f)}: ${f.error}`]);
  }
  if (r.rollback) {
    at.push([r.rollback.startedAt, `rollback started: ${r.rollback.reason}`]);
    if (r.rollback.endedAt) at.push([r.rollback.endedAt, `rollback ended${r.rollback.complete === false ? ' INCOMPLETE' : ''}`]);
  }
  for (const w of r.warnings ?? []) at.push([w.at, `warning: ${w.message}`]);
  if (r.endedAt) at.push([r.endedAt, `run ended: ${r.status}`]);
  return at.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([t, what]) => `${t}  ${what}`);
}

/** A saved report as text an assistant reads: the summary, the recovery objectives, the timeline. Not yet redacted. */
export function reportText(r: RunReport): string {
  const objectives = (r.objectives ?? []).map(
    (o) =>
      `  ${o.name}: ${o.status} within ${formatDuration(o.withinMs)}${o.recoveryMs === undefined ? '' : `, recovered in ${formatDuration(o.recoveryMs)}`}: ${o.detail}`,
  );
  return [
    reportSummary(r),
    '',
    objectives.length ? 'Recovery objectives:' : 'Recovery objectives: none',
    ...objectives,
    '',
    'Timeline:',
    ...timeline(r).map((l) => `  ${l}`),
  ].join('\n');
}
