import { formatDuration } from '../core/duration.js';
import type { RunReport } from './collect.js';

/** One line on a saved run, as `kube-runbook report` prints it and the MCP server's report text opens. */
export function reportSummary(r: RunReport): string {
  const reverted = r.faults.filter((f) => f.status === 'reverted').length;
  const took = r.durationMs === undefined ? '' : `, took ${formatDuration(r.durationMs)}`;
  const left = r.remaining.length ? `; ${r.remaining.length} left applied: ${r.recoverCommand ?? 'see report.json'}` : '';
  return (
    `run ${r.runId} of ${r.runbook} on context "${r.context}": ${r.status} (${r.reason})${took}; ` +
    `${r.faults.length} fault(s), ${reverted} reverted, ${r.guardFirings.length} guard firing(s)${left}`
  );
}
