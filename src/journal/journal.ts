import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { KrError } from '../core/errors.js';
import { redactStrings } from '../core/redact.js';
import { toolVersion } from '../core/version.js';
import type { RevertState } from '../contract/action.js';
import type { Inventory } from '../inventory/schema.js';
import type { ProbeRef } from '../runbook/schema.js';
import type { Attempt, RunStatus } from './outcomes.js';
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
  /** spec.safety.allowContexts, so `recover` refuses a context the runbook did not allow (absent in older journals). */
  allowContexts?: string[];
  /** Where the run's lock is (absent in older journals): `recover` releases it once nothing remains. */
  lockNamespace?: string;
  faultTtlMs: number;
  remediationTtlMs?: number;
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
  /** The dead-man of a reverted fault could not be removed: its watcher may run the (idempotent) revert again. */
  | { type: 'disarm-failed'; at: number; faultId: string; node: string; error: string }
  /** A remediation the rollback did not undo (its condition did not hold): its dead-man was disarmed; `recover` undoes it. */
  | { type: 'left-in-place'; at: number; faultId: string; reason: string }
  | { type: 'end'; at: number; status: RunStatus };

/** As written: every record says which version of the tool wrote it (absent in journals of older versions). */
type Stored = JournalRecord & { version?: string };

/**
 * Somewhere else the journal is kept as it is written: the in-cluster copy (src/journal/cluster-copy.ts), so a
 * run whose pod and its disk went away can still be recovered. `write` gets the whole journal each time.
 */
export interface JournalCopy {
  write(text: string): Promise<void>;
  /** A write failed; the next append (or `copied`) tries again with the whole journal. */
  failed(error: unknown): void;
}

/**
 * Append-only JSONL, one file per run. Every record is fsynced before `append` returns, so a fault is on disk
 * before it is applied and `recover` in a new process finds it. A torn last line (a crash mid-write: never
 * fsynced, so nothing relied on it) is cut off before the first append, so the next record starts a line.
 * With a copy, every append also sends the journal there, one write at a time, the newest text winning.
 */
export class Journal {
  private fd: number | undefined;
  /** Bytes of the file the copy holds. */
  private copiedBytes = 0;
  private copying: Promise<boolean> | undefined;

  constructor(
    readonly file: string,
    private readonly copy?: JournalCopy,
  ) {}

  static forRun(runId: string, dir = runsDir(), copy?: JournalCopy): Journal {
    return new Journal(join(dir, `${runId}.jsonl`), copy);
  }

  /** Whether the journal is copied anywhere. */
  get copied(): boolean {
    return this.copy !== undefined;
  }

  /**
   * Resolves true once the copy holds every record appended so far (trying a failed write again once), false when a
   * write fails. Without a copy, true.
   */
  async synced(): Promise<boolean> {
    if (!this.copy) return true;
    for (let tries = 0; tries < 2; tries++) {
      const want = sizeOf(this.file);
      if (this.copiedBytes >= want) return true;
      if (!(await this.sendCopy())) return false;
    }
    return this.copiedBytes >= sizeOf(this.file);
  }

  /** One write at a time: a write asked for while one is on its way starts when it ends, with the newest text. */
  private sendCopy(): Promise<boolean> {
    const prev = this.copying ?? Promise.resolve(true);
    const next = prev.then(async () => {
      const text = readFileSync(this.file);
      if (this.copiedBytes >= text.length) return true;
      try {
        await this.copy!.write(text.toString('utf8'));
        this.copiedBytes = text.length;
        return true;
      } catch (e) {
        this.copy!.failed(e);
        return false;
      }
    });
    this.copying = next;
    return next;
  }

  append(record: JournalRecord): void {
    if (this.fd === undefined) {
      const dir = dirname(this.file);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this.fd = openSync(this.file, 'a+', 0o600);
      cutTornTail(this.fd);
      syncDir(dir);
    }
    // Secrets in free text (errors, reasons, URLs in the inventory snapshot) stay out; a fault's revert state is kept
    // as it is, since `recover` replays it.
    const kept = Object.fromEntries(Object.entries(record).map(([k, v]) => [k, k === 'state' ? v : redactStrings(v)])) as JournalRecord;
    writeSync(this.fd, `${JSON.stringify({ ...kept, version: toolVersion() } satisfies Stored)}\n`);
    fsyncSync(this.fd);
    if (this.copy) void this.sendCopy();
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Truncates the file after its last newline when it does not end with one. */
function cutTornTail(fd: number): void {
  const size = fstatSync(fd).size;
  if (size === 0) return;
  const buf = Buffer.alloc(Math.min(size, 1 << 20));
  let end = size;
  while (end > 0) {
    const n = Math.min(buf.length, end);
    readSync(fd, buf, 0, n, end - n);
    const nl = buf.subarray(0, n).lastIndexOf(0x0a);
    if (nl === n - 1 && end === size) return;
    if (nl >= 0) {
      ftruncateSync(fd, end - n + nl + 1);
      fsyncSync(fd);
      return;
    }
    end -= n;
  }
  ftruncateSync(fd, 0);
  fsyncSync(fd);
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
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

/**
 * Reads a journal. A torn last line (a crash mid-write) is ignored; any other line that is not a record is an
 * error naming the file and the line: a journal someone edited or that the disk damaged is not guessed at.
 */
export function readJournal(file: string): JournalView {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new KrError('JOURNAL_UNREADABLE', `cannot read journal ${file}: ${(e as Error).message}`, { exit: 2 });
  }
  return parseJournal(text, file);
}

/** A journal's text (a file's, or the cluster's copy of it), `file` naming where it came from in errors. */
export function parseJournal(text: string, file: string): JournalView {
  const records: JournalRecord[] = [];
  const lines = text.split('\n');
  for (const [i, line] of lines.entries()) {
    if (!line.trim()) continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      // the last line without its newline is a write torn by a crash; anything else is damage
      if (i === lines.length - 1) continue;
    }
    if (!isRecord(record))
      throw new KrError('JOURNAL_INVALID', `${file}:${i + 1}: not a journal record: ${line.length > 80 ? `${line.slice(0, 79)}…` : line}`, {
        exit: 2,
      });
    records.push(record);
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

const isRecord = (r: unknown): r is JournalRecord =>
  typeof r === 'object' &&
  r !== null &&
  typeof (r as { type?: unknown }).type === 'string' &&
  typeof (r as { at?: unknown }).at === 'number';

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
  return names
    .sort()
    .reverse()
    .map((n) => join(dir, n));
}
