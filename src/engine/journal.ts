import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { KrError } from '../core/errors.js';
import type { RevertState } from '../contract/action.js';
import type { Inventory } from '../inventory/schema.js';
import type { ProbeRef } from '../runbook/schema.js';
import type { Attempt, RunStatus } from './events.js';
import { runsDir } from './state-dir.js';

export interface RunRecord {
  type: 'run';
  at: number;
  runId: string;
  runbookFile: string;
  runbookName: string;
  inventoryFile: string;
  /** A snapshot, so `recover` reaches the nodes even if the file changed or moved. */
  inventory: Inventory;
  kubeconfig?: string;
  context: string;
  faultTtlMs: number;
  waitFor?: ProbeRef & { withinMs: number };
  pid: number;
  host: string;
}

export interface PreparedRecord {
  type: 'prepared';
  at: number;
  faultId: string;
  action: string;
  node?: string;
  step: string;
  remediation: boolean;
  state: RevertState;
  deadman: boolean;
}

/** A failed attempt at something retried (src/engine/retry.ts); journals written before retries have none. */
export interface AttemptRecord extends Attempt {
  type: 'attempt';
  at: number;
  faultId?: string;
  node?: string;
}

export type JournalRecord =
  | RunRecord
  | PreparedRecord
  | { type: 'applied'; at: number; faultId: string; state: RevertState }
  | { type: 'apply-failed'; at: number; faultId: string; error: string }
  | AttemptRecord
  /** `attempts`: made in all (absent in journals written before retries: one). */
  | { type: 'reverted'; at: number; faultId: string; by: 'executor' | 'recover'; attempts?: number }
  | { type: 'revert-failed'; at: number; faultId: string; error: string; attempts?: number }
  | { type: 'end'; at: number; status: RunStatus };

/**
 * Append-only JSONL, one file per run. Every record is fsynced before `append` returns, so a fault is on disk
 * before it is applied and `recover` in a new process finds it.
 */
export class Journal {
  private fd: number | undefined;

  constructor(readonly file: string) {}

  static forRun(runId: string, dir = runsDir()): Journal {
    return new Journal(join(dir, `${runId}.jsonl`));
  }

  append(record: JournalRecord): void {
    if (this.fd === undefined) {
      const dir = dirname(this.file);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this.fd = openSync(this.file, 'a', 0o600);
      syncDir(dir);
    }
    writeSync(this.fd, `${JSON.stringify(record)}\n`);
    fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

function syncDir(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    fsyncSync(fd);
    closeSync(fd);
  } catch {
    // not every filesystem lets a directory be fsynced; the file itself is
  }
}

export interface FaultEntry {
  prepared: PreparedRecord;
  state: RevertState;
  applied: boolean;
  reverted: boolean;
  error?: string;
  /** Failed attempts at its arm, revert or disarm, in order. */
  attempts: AttemptRecord[];
}

export interface JournalView {
  file: string;
  run: RunRecord;
  faults: FaultEntry[];
  status?: RunStatus;
}

/** Reads a journal; a torn last line (a crash mid-write) is ignored. */
export function readJournal(file: string): JournalView {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new KrError('JOURNAL_UNREADABLE', `cannot read journal ${file}: ${(e as Error).message}`, { exit: 2 });
  }
  const records: JournalRecord[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      records.push(JSON.parse(line) as JournalRecord);
    } catch {
      // torn write at a crash
    }
  }
  const run = records.find((r): r is RunRecord => r.type === 'run');
  if (!run) throw new KrError('JOURNAL_INVALID', `journal ${file} has no run record`, { exit: 2 });
  const faults = new Map<string, FaultEntry>();
  let status: RunStatus | undefined;
  for (const r of records) {
    if (r.type === 'prepared') faults.set(r.faultId, { prepared: r, state: r.state, applied: false, reverted: false, attempts: [] });
    else if (r.type === 'applied') update(faults, r.faultId, (f) => ((f.applied = true), (f.state = r.state)));
    else if (r.type === 'apply-failed') update(faults, r.faultId, (f) => (f.error = r.error));
    else if (r.type === 'reverted') update(faults, r.faultId, (f) => (f.reverted = true));
    else if (r.type === 'revert-failed') update(faults, r.faultId, (f) => (f.error = r.error));
    else if (r.type === 'attempt' && r.faultId !== undefined) update(faults, r.faultId, (f) => f.attempts.push(r));
    else if (r.type === 'end') status = r.status;
  }
  return { file, run, faults: [...faults.values()], status };
}

function update(faults: Map<string, FaultEntry>, id: string, fn: (f: FaultEntry) => void): void {
  const f = faults.get(id);
  if (f) fn(f);
}

/** Faults prepared and not reverted, in the order they were prepared. */
export const outstanding = (view: JournalView): FaultEntry[] => view.faults.filter((f) => !f.reverted);

/** Journals of every run under `dir`, newest first. */
export function listJournals(dir = runsDir()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.jsonl'));
  } catch {
    return [];
  }
  return names.sort().reverse().map((n) => join(dir, n));
}
