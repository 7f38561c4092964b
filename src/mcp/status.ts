import { basename } from 'node:path';
import { messageOf } from '../core/errors.js';
import { listJournals, outstanding, readJournal } from '../journal/journal.js';

/** The runs journaled on this machine, newest first (at most LIMIT): how each ended and what it may have left applied. */
export function journaledRuns(dir: string, limit = 20): unknown[] {
  return listJournals(dir)
    .slice(0, limit)
    .map((file) => {
      try {
        const v = readJournal(file);
        const left = outstanding(v);
        return {
          runId: v.run.runId,
          runbook: v.run.runbookName,
          context: v.run.context,
          startedAt: new Date(v.run.at).toISOString(),
          status: v.status ?? 'not ended (running, or killed: `recover` reverts what it left)',
          faults: v.faults.length,
          stillApplied: left.map((f) => ({ action: f.prepared.action, node: f.prepared.node ?? null, faultId: f.prepared.faultId })),
        };
      } catch (e) {
        return { runId: basename(file, '.jsonl'), error: messageOf(e) };
      }
    });
}
