import { existsSync, readFileSync } from 'node:fs';
import { realClock } from '../../../src/core/clock.js';
import { shq } from '../../../src/core/shell.js';
import { DEADMAN_MARGIN_MS } from '../../../src/engine/deadman.js';
import { DEADMAN_ROOT } from '../../../src/nodes/keepalive.js';

/**
 * What a test that SIGKILLs the executor reads, so that the kill lands where it says and the dead-man's firing is
 * seen where it happens: the run's journal (its `applied` records: the apply confirmed) before the kill, the node's
 * own dead-man records (/var/lib/kube-runbook/deadman/<runId>/<faultId>.fired: fired-at, exit, the keepalive's
 * time) after it.
 */

/** A record of the run's journal (src/journal/journal.ts), as much of it as these tests read. */
export interface JournalEntry {
  type: string;
  at: number;
  faultId?: string;
  action?: string;
  node?: string;
  state?: Record<string, unknown>;
}

/** The journal's records so far; a line still being written is left out. */
export function journalEntries(file: string): JournalEntry[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{') && l.endsWith('}'))
    .map((l) => JSON.parse(l) as JournalEntry);
}

/** The run id and journal path the run's first line gives (`run <id>: … (journal <path>)`), once it is out. */
function journalOf(out: string): { runId: string; file: string } | undefined {
  const m = /run (\S+): .*\(journal (\S+\.jsonl)\)/.exec(out);
  return m ? { runId: m[1]!, file: m[2]! } : undefined;
}

/** A fault the journal records as applied: its prepared record, with when it was applied. */
export interface AppliedFault {
  faultId: string;
  action: string;
  node?: string;
  state: Record<string, unknown>;
  appliedAt: number;
}

/** The faults the journal records as applied, in order. */
function appliedFaults(records: JournalEntry[]): AppliedFault[] {
  return records
    .filter((r) => r.type === 'applied')
    .map((a) => {
      const p = records.find((r) => r.type === 'prepared' && r.faultId === a.faultId)!;
      return { faultId: a.faultId!, action: p.action!, node: p.node, state: { ...p.state, ...a.state }, appliedAt: a.at };
    });
}

export interface RunUnderWay {
  /** What the run printed so far. */
  out(): string;
  /** Whether it has ended. */
  ended(): boolean;
}

/**
 * Resolves, once the run's journal records every fault of `want` (an action, and the node where given) as applied,
 * with the run id, the journal and its applied faults. Fails when the run ends first or after `timeoutMs`.
 */
export async function untilJournalApplied(
  run: RunUnderWay,
  want: { action: string; node?: string }[] | number,
  timeoutMs = 90_000,
): Promise<{ runId: string; file: string; applied: AppliedFault[] }> {
  const deadline = realClock.now() + timeoutMs;
  const done = (applied: AppliedFault[]) =>
    typeof want === 'number'
      ? applied.length >= want
      : want.every((w) => applied.some((a) => a.action === w.action && (w.node === undefined || a.node === w.node)));
  for (;;) {
    const j = journalOf(run.out());
    const applied = j ? appliedFaults(journalEntries(j.file)) : [];
    if (j && done(applied)) return { ...j, applied };
    const why = run.ended() ? 'the run ended' : realClock.now() > deadline ? `${timeoutMs} ms passed` : '';
    if (why)
      throw new Error(
        `${why} before its journal recorded ${JSON.stringify(want)} applied (${j ? `${applied.length} applied` : 'no journal yet'}):\n${run.out().slice(-2000)}`,
      );
    await realClock.sleep(20);
  }
}

/** A command on the node: a shell script run there, its stdout. */
export type OnNode = (script: string) => Promise<string>;

/** A dead-man of the run, from the node's own records; times in epoch seconds, as the node keeps them. */
export interface DeadmanRecord {
  faultId: string;
  fired: boolean;
  /** When it fired (absent while armed). */
  firedAt?: number;
  /** Its revert's exit code, once it has ended. */
  exit?: string;
  /** The keepalive file's time: the last keepalive the node saw. */
  keepalive: number;
  /** The fired revert's output. */
  revertLog?: string;
}

/** Every dead-man of run `runId` on the node, armed or fired. */
export async function deadmanRecords(onNode: OnNode, runId: string, root = DEADMAN_ROOT): Promise<DeadmanRecord[]> {
  const out = await onNode(
    `for d in ${shq(`${root}/${runId}`)}/*; do [ -d "$d" ] || continue; ` +
      'printf "%s\\t%s\\t%s\\t%s\\t%s\\n" "${d##*/}" "$(cat "$d/fired-at" 2>/dev/null || echo -)" "$(cat "$d/exit" 2>/dev/null || echo -)" ' +
      '"$(stat -c %Y "$d/keepalive" 2>/dev/null || echo 0)" "$(head -c 600 "$d/revert.log" 2>/dev/null | tr "\\t\\n" "  ")"; done',
  );
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [dir, firedAt, exit, keepalive, log] = l.split('\t') as [string, string, string, string, string?];
      const fired = dir.endsWith('.fired');
      return {
        faultId: dir.replace(/\.fired$/, ''),
        fired,
        ...(firedAt !== '-' && { firedAt: Number(firedAt) }),
        ...(exit !== '-' && { exit }),
        keepalive: Number(keepalive),
        ...(fired && { revertLog: log ?? '' }),
      };
    });
}

/**
 * Waits until the node's record shows the dead-man of `faultId` fired and its revert ended, and checks what the node
 * recorded: it fired within `ttlMs` + DEADMAN_MARGIN_MS of the last keepalive the node saw, that keepalive was no later
 * than the kill (nothing kept the fault alive after it; the node counts whole seconds), and the revert exited 0.
 * Returns the record, for the figures.
 */
export async function deadmanFired(
  onNode: OnNode,
  runId: string,
  faultId: string,
  o: { ttlMs: number; killedAt: number; timeoutMs?: number; root?: string },
): Promise<DeadmanRecord> {
  const deadline = realClock.now() + (o.timeoutMs ?? o.ttlMs + DEADMAN_MARGIN_MS + 60_000);
  let last: DeadmanRecord | undefined;
  for (;;) {
    last = (await deadmanRecords(onNode, runId, o.root)).find((d) => d.faultId === faultId);
    if (last?.fired && last.exit !== undefined) break;
    if (realClock.now() > deadline)
      throw new Error(
        `the dead-man of ${faultId} (run ${runId}) has not fired and ended its revert: the node's record ${JSON.stringify(last)}`,
      );
    await realClock.sleep(250);
  }
  const r = last;
  const what = `${faultId}'s dead-man (node's record ${JSON.stringify(r)})`;
  if (r.keepalive > Math.ceil(o.killedAt / 1000) + 1) throw new Error(`${what}: a keepalive after the kill at ${o.killedAt / 1000}`);
  if (r.firedAt! - r.keepalive > (o.ttlMs + DEADMAN_MARGIN_MS) / 1000)
    throw new Error(
      `${what}: fired ${r.firedAt! - r.keepalive} s after the last keepalive, beyond faultTtl + ${DEADMAN_MARGIN_MS / 1000} s`,
    );
  if (r.exit !== '0') throw new Error(`${what}: its revert exited ${r.exit}`);
  return r;
}
