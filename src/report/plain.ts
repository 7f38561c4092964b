import type { RedactedSink } from '../engine/sinks.js';
import { formatDuration } from '../core/duration.js';
import { attemptLine, onAttempt } from './attempts.js';

const time = (at: number) => new Date(at).toISOString().slice(11, 23);

/**
 * One line per event, for logs and CI (no terminal control codes). Guard readings are shown only when a guard's
 * status changes, so a busy probe does not flood the log.
 */
export function plainRenderer(write: (line: string) => void): RedactedSink {
  const lastStatus = new Map<string, string>();
  let started = 0;
  return (e) => {
    const t = time(e.at);
    switch (e.type) {
      case 'run-start':
        started = e.at;
        return write(`${t} run ${e.runId}: ${e.runbook} on context "${e.context}"${e.journal ? ` (journal ${e.journal})` : ''}`);
      case 'preflight':
        return write(`${t} preflight ${e.ok ? 'ok  ' : 'FAIL'} ${e.check}: ${e.detail}`);
      case 'step-start':
        return write(`${t} ▶ ${e.index}. ${e.name}`);
      case 'step-end':
        return write(
          `${t} ${e.status === 'passed' ? '✔' : e.status === 'skipped' ? '-' : '✖'} ${e.index}. ${e.name}: ${e.status} — ${e.detail}`,
        );
      case 'fault-applied':
        return write(
          `${t}   applied ${e.fault.action}${e.fault.node ? ` on ${e.fault.node}` : ''}${e.fault.remediation ? ' (remediation)' : ''}`,
        );
      case 'fault-apply-failed':
        return write(`${t}   FAILED to apply ${e.fault.action}${e.fault.node ? ` on ${e.fault.node}` : ''}: ${e.error}`);
      case 'fault-reverted': {
        const tries = onAttempt(e.attempts, e.retried);
        return write(`${t}   reverted ${e.fault.action}${e.fault.node ? ` on ${e.fault.node}` : ''}${tries ? ` ${tries}` : ''}`);
      }
      case 'fault-revert-failed': {
        const tries = onAttempt(e.attempts, e.retried);
        return write(
          `${t}   FAILED to revert ${e.fault.action}${e.fault.node ? ` on ${e.fault.node}` : ''}${tries ? ` ${tries}` : ''}: ${e.error}`,
        );
      }
      case 'attempt':
        // a final failure of a revert is said by its FAILED line; every other failed attempt is said here
        if (e.retryInMs === undefined && e.op === 'revert') return;
        return write(`${t}   ${attemptLine(e)}`);
      case 'guard-reading': {
        if (lastStatus.get(e.guard) === e.reading.status) return;
        lastStatus.set(e.guard, e.reading.status);
        return write(`${t}   guard ${e.guard}: ${e.reading.status} — ${e.reading.detail}`);
      }
      case 'observation': {
        // a countdown ("first eviction in 27.6s") is not news: numbers aside, has anything changed?
        const key = `observer ${e.name}`;
        const gist = `${e.reading.status}|${e.reading.detail.replace(/\d+(?:\.\d+)?/g, '#')}`;
        if (lastStatus.get(key) === gist || e.reading.status === 'unknown') return;
        lastStatus.set(key, gist);
        return write(`${t}   ${e.name}: ${e.reading.detail}`);
      }
      case 'guard-fired':
        return write(`${t} ⚑ guard ${e.guard} → ${e.response}: ${e.detail}`);
      case 'remediation':
        return write(`${t} ${e.phase === 'start' ? '⛑ remediation: ' : '⛑ '}${e.detail}`);
      case 'confirm':
        return write(`${t} ? ${e.message} → ${e.answer}`);
      case 'rollback-start':
        return write(`${t} ↺ rollback (${e.reason}): ${e.faults.length} to revert`);
      case 'rollback-wait':
        return write(`${t} ↺ ${e.detail}`);
      case 'rollback-end':
        return write(`${t} ↺ rollback ${e.complete ? 'complete' : `INCOMPLETE: ${e.remaining.length} still applied`}`);
      case 'log':
        return write(`${t} ${e.level === 'info' ? '' : `${e.level}: `}${e.message}`);
      case 'objective':
        return write(
          `${t} ◷ objective ${e.name} ${e.phase === 'start' ? `clock started (${e.detail}; within ${formatDuration(e.withinMs)})` : `${e.phase.toUpperCase()}: ${e.detail}`}`,
        );
      case 'run-end': {
        write(`${t} ■ ${e.status.toUpperCase()} after ${formatDuration(e.at - (started || e.at))}: ${e.reason}`);
        for (const f of e.remaining)
          write(
            `    still applied: ${f.action}${f.node ? ` on ${f.node}` : ''} (${f.faultId})${f.manualRevert ? `; by hand on the node: ${f.manualRevert.split('\n')[0]}` : ''}`,
          );
        if (e.recoverCommand) write(`    to revert: ${e.recoverCommand}`);
        return;
      }
    }
  };
}
