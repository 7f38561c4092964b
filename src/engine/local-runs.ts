import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { messageOf } from '../core/errors.js';
import { type JournalView, listJournals, outstanding, readJournal } from './journal.js';

/**
 * A run of this machine, by its journal: `running` (no end yet, its process alive), `killed` (no end, its process
 * gone: `recover` undoes what it left), `ended` with something still applied; or `elsewhere` (started on another host).
 */
export interface LocalRun {
  runId: string;
  runbook: string;
  journal: string;
  pid: number;
  host: string;
  since: string;
  state: 'running' | 'killed' | 'ended' | 'elsewhere';
  /** Faults and remediations not reverted, by the journal. */
  applied: number;
}

export interface ProcessProbe {
  /** Whether a process of that pid runs (signal 0). */
  alive(pid: number): boolean;
  /** Its command line, when the system says (Linux: /proc); a pid reused by another program is not signalled. */
  cmdline(pid: number): string | undefined;
}

export const realProcesses: ProcessProbe = {
  alive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
  cmdline(pid) {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      return undefined;
    }
  },
};

/** Whether `pid` is still a kube-runbook process (not a pid reused by another program since). */
const isKubeRunbook = (p: ProcessProbe, pid: number) => p.alive(pid) && (p.cmdline(pid) ?? 'kube-runbook').includes('runbook');

/** The runs under `dir` that are running, were killed, or ended with something applied; newest first. */
export function localRuns(dir: string, p: ProcessProbe = realProcesses, host = hostname()): { runs: LocalRun[]; unreadable: string[] } {
  const runs: LocalRun[] = [];
  const unreadable: string[] = [];
  for (const file of listJournals(dir)) {
    let v: JournalView;
    try {
      v = readJournal(file);
    } catch (e) {
      unreadable.push(`${file}: ${messageOf(e)}`);
      continue;
    }
    const applied = outstanding(v).length;
    const state: LocalRun['state'] =
      v.status !== undefined
        ? 'ended'
        : v.run.host !== host
          ? 'elsewhere'
          : v.run.pid !== process.pid && isKubeRunbook(p, v.run.pid)
            ? 'running'
            : 'killed';
    if (state === 'ended' && applied === 0) continue;
    runs.push({
      runId: v.run.runId,
      runbook: v.run.runbookName,
      journal: file,
      pid: v.run.pid,
      host: v.run.host,
      since: new Date(v.run.at).toISOString(),
      state,
      applied,
    });
  }
  return { runs, unreadable };
}

/**
 * SIGTERM to each run of this machine that is running: each rolls back as on Ctrl-C (src/cli/signals.ts). Returns
 * those signalled, and those that could not be (with why).
 */
export function stopLocalRuns(
  runs: readonly LocalRun[],
  kill: (pid: number, signal: NodeJS.Signals) => void = (pid, s) => process.kill(pid, s),
): { stopped: LocalRun[]; failed: string[] } {
  const stopped: LocalRun[] = [];
  const failed: string[] = [];
  for (const r of runs.filter((x) => x.state === 'running'))
    try {
      kill(r.pid, 'SIGTERM');
      stopped.push(r);
    } catch (e) {
      failed.push(`run ${r.runId} (pid ${r.pid}): ${messageOf(e)}`);
    }
  return { stopped, failed };
}
