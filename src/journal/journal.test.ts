import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toolVersion } from '../core/version.js';
import { Journal, outstanding, parseJournal, readJournal } from './journal.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = {
  type: 'run',
  at: 1,
  runId: 'r1',
  runbookFile: 'rb.yaml',
  runbookName: 'rb',
  inventoryFile: 'inv.yaml',
  inventory: {},
  context: 'lab',
  faultTtlMs: 60_000,
  pid: 1,
  host: 'h',
};
const prepared = (faultId: string) => ({
  type: 'prepared',
  at: 2,
  faultId,
  action: 'run-command',
  node: 'node-1',
  step: '1 x',
  remediation: false,
  state: {},
  deadman: true,
});
const write = (name: string, records: object[]) => {
  const file = join(dir, name);
  writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
};

describe('readJournal', () => {
  it('reads a journal written before retries (no attempt records, no attempt counts)', () => {
    const file = write('old.jsonl', [
      run,
      prepared('f01'),
      { type: 'applied', at: 3, faultId: 'f01', state: {} },
      { type: 'reverted', at: 4, faultId: 'f01', by: 'executor' },
      prepared('f02'),
      { type: 'revert-failed', at: 5, faultId: 'f02', error: 'exit 1' },
    ]);
    const view = readJournal(file);
    expect(view.faults.map((f) => [f.prepared.faultId, f.reverted, f.error, f.attempts])).toEqual([
      ['f01', true, undefined, []],
      ['f02', false, 'exit 1', []],
    ]);
    expect(outstanding(view).map((f) => f.prepared.faultId)).toEqual(['f02']);
  });

  it("lists each fault's failed attempts, and skips attempts of nothing it knows", () => {
    const attempt = (faultId: string | undefined, n: number, extra = {}) => ({
      type: 'attempt',
      at: 5 + n,
      op: 'revert',
      faultId,
      node: 'node-1',
      attempt: n,
      error: 'reset',
      transient: 'connection reset',
      ...extra,
    });
    const file = write('new.jsonl', [
      run,
      prepared('f01'),
      attempt('f01', 1, { retryInMs: 400 }),
      {
        type: 'attempt',
        at: 6,
        op: 'keepalive',
        node: 'node-1',
        attempt: 1,
        error: 'reset',
        transient: 'connection reset',
        retryInMs: 300,
      },
      attempt('f09', 1),
      attempt('f01', 2, { retryInMs: 900 }),
      { type: 'reverted', at: 8, faultId: 'f01', by: 'executor', attempts: 3 },
    ]);
    const [f] = readJournal(file).faults;
    expect(f?.reverted).toBe(true);
    expect(f?.attempts.map((a) => [a.op, a.attempt, a.retryInMs])).toEqual([
      ['revert', 1, 400],
      ['revert', 2, 900],
    ]);
  });

  it('ignores a torn last line, and the next append starts a new line after cutting it off', () => {
    const file = write('torn.jsonl', [run, prepared('f01')]);
    appendFileSync(file, '{"type":"applied","at":3,"fau');
    expect(readJournal(file).faults.map((f) => [f.prepared.faultId, f.applied])).toEqual([['f01', false]]);
    const j = new Journal(file);
    j.append({ type: 'reverted', at: 4, faultId: 'f01', by: 'recover' });
    j.close();
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(readJournal(file).faults.map((f) => [f.prepared.faultId, f.reverted])).toEqual([['f01', true]]);
  });

  it('refuses a journal with a bad line that is not the last, naming the line', () => {
    const file = write('bad.jsonl', [run, prepared('f01')]);
    appendFileSync(file, 'garbage here\n' + JSON.stringify({ type: 'reverted', at: 4, faultId: 'f01', by: 'executor' }) + '\n');
    expect(() => readJournal(file)).toThrow(`${file}:3: not a journal record: garbage here`);
    const file2 = write('bad2.jsonl', [run, prepared('f01'), [1, 2]]);
    expect(() => readJournal(file2)).toThrow(`${file2}:3: not a journal record`);
  });

  it('keeps secrets in free text out of the journal, and a revert state as it is', () => {
    const file = join(dir, 'secrets.jsonl');
    const j = new Journal(file);
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----';
    const inventory = { spec: { prometheus: { url: 'https://scrape:hunter2@prom.example/' } } };
    j.append({ ...run, inventory } as never);
    const state = { script: 'curl -H "Authorization: Bearer abc123" https://x/' };
    j.append({ ...prepared('f01'), state } as never);
    j.append({ type: 'attempt', at: 3, op: 'revert', faultId: 'f01', attempt: 1, error: `ssh: ${pem}` });
    j.append({ type: 'revert-failed', at: 4, faultId: 'f01', error: 'exit 1: Authorization: Bearer eyJhbGciOiJI.eyJzdWIiOiIx.sig' });
    j.close();
    const text = readFileSync(file, 'utf8');
    expect(text).not.toMatch(/hunter2|MIIEvQ|eyJhbGci/);
    const view = readJournal(file);
    expect(view.run?.inventory).toEqual({ spec: { prometheus: { url: 'https://scrape:[redacted]@prom.example/' } } });
    expect(view.faults[0]?.prepared.state).toEqual(state);
    expect(view.faults[0]?.attempts[0]?.error).toBe('ssh: -----BEGIN PRIVATE KEY-----[redacted]-----END PRIVATE KEY-----');
    expect(view.faults[0]?.error).toBe('exit 1: Authorization: Bearer [redacted]');
  });

  it('writes the tool version in every record', () => {
    const file = join(dir, 'version.jsonl');
    const j = new Journal(file);
    j.append(run as never);
    j.append({ type: 'end', at: 9, status: 'passed' });
    j.close();
    const records = readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { version?: string });
    expect(records.map((r) => r.version)).toEqual([toolVersion(), toolVersion()]);
    expect(toolVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('the journal copy', () => {
  /** A copy that keeps what it was sent, failing the first `failures` writes. */
  const copyTo = (failures = 0) => {
    const sent: string[] = [];
    const errors: string[] = [];
    let left = failures;
    return {
      sent,
      errors,
      copy: {
        write: async (text: string) => {
          if (left-- > 0) throw new Error('503 the apiserver is shutting down');
          sent.push(text);
        },
        failed: (e: unknown) => errors.push((e as Error).message),
      },
    };
  };

  it('holds the whole journal, as on disk, once synced; recover reads the copy as it reads the file', async () => {
    const c = copyTo();
    const j = Journal.forRun('r-copy', dir, c.copy);
    j.append(run as never);
    j.append(prepared('f01') as never);
    expect(await j.synced()).toBe(true);
    j.close();
    expect(c.sent.at(-1)).toBe(readFileSync(j.file, 'utf8'));
    expect(outstanding(parseJournal(c.sent.at(-1)!, 'cluster copy')).map((f) => f.prepared.faultId)).toEqual(['f01']);
  });

  it('sends the journal again after a failed write, and says when it cannot', async () => {
    const once = copyTo(1);
    const j = Journal.forRun('r-retry', dir, once.copy);
    j.append(run as never);
    expect(await j.synced()).toBe(true);
    expect(once.errors).toEqual(['503 the apiserver is shutting down']);
    expect(once.sent).toEqual([readFileSync(j.file, 'utf8')]);

    const never = copyTo(Infinity);
    const k = Journal.forRun('r-never', dir, never.copy);
    k.append(run as never);
    expect(await k.synced()).toBe(false);
    expect(never.sent).toEqual([]);
    expect(never.errors.length).toBeGreaterThan(0);
  });

  it('without a copy, synced is true and nothing is copied', async () => {
    const j = Journal.forRun('r-local', dir);
    j.append(run as never);
    expect(j.copied).toBe(false);
    expect(await j.synced()).toBe(true);
  });
});
