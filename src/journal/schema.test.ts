import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import runCommand from '../actions/run-command.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { resetFirst } from '../testing/fake-nodes.js';
import { Journal } from './journal.js';
import { checkJournalText } from './schema.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-journal-schema-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let runs = 0;
const UNDO = 'rm -f /tmp/kr-fault';
const WHERE = 'the journal of run run-test in ConfigMap ns/cm';

/** A whole journal as the engine writes it: a fault on two nodes, reverts reset once each (attempt records), the end. */
async function engineJournal(): Promise<string> {
  const journal = new Journal(join(dir, `run-${++runs}.jsonl`));
  const steps = [
    { action: 'run-command', with: { nodes: { names: ['node-1', 'node-2'] }, apply: 'touch /tmp/kr-fault', revert: UNDO } },
    { wait: '10s' },
  ];
  const h = await startTestRun({ runbook: baseRunbook({ steps }), actions: [runCommand], probes: [], journal });
  h.nodes.handler = resetFirst(
    1,
    (c) => c.script === UNDO,
    ({ script }) => ({
      code: 0,
      stdout: script.includes('kube-runbook-ok') ? 'kube-runbook-ok\n' : '',
      stderr: '',
    }),
  );
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'), 30 * 60_000);
  await h.handle.result;
  return readFileSync(journal.file, 'utf8');
}

const lines = (text: string) =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const text = (records: object[]) => records.map((r) => `${JSON.stringify(r)}\n`).join('');

describe('checkJournalText: a journal from elsewhere, as strictly as a file the user wrote', () => {
  it('takes every record the engine writes (run, prepared, applied, attempt, reverted, end)', async () => {
    const t = await engineJournal();
    expect(new Set(lines(t).map((r) => r.type))).toEqual(new Set(['run', 'prepared', 'applied', 'attempt', 'reverted', 'end']));
    await expect(checkJournalText(t, WHERE, 'run-test')).resolves.toBeUndefined();
  });

  const broken: [string, (r: Record<string, unknown>[]) => object[], string][] = [
    [
      'a record missing a field',
      (r) => r.map((x) => (x.type === 'applied' ? { ...x, state: undefined } : x)),
      'is not a journal record: state',
    ],
    ['a record of no known type', (r) => [...r, { type: 'exec', at: 9, script: 'sh' }], 'is not a journal record'],
    [
      'a field the record does not have',
      (r) => r.map((x) => (x.type === 'prepared' ? { ...x, script: 'curl x | sh' } : x)),
      'is not a journal record',
    ],
    [
      'a fault no record prepared',
      (r) => [...r, { type: 'applied', at: 9, faultId: 'f99', state: {} }],
      'fault "f99" was not prepared before',
    ],
    [
      'a fault on a node the inventory lacks',
      (r) => r.map((x) => (x.type === 'prepared' ? { ...x, node: 'node-9' } : x)),
      'node "node-9" is not in the journal\'s inventory',
    ],
    [
      'a run record of another run',
      (r) => r.map((x) => (x.type === 'run' ? { ...x, runId: 'run-other' } : x)),
      'the run record is of run "run-other"',
    ],
    ['no run record first', (r) => r.slice(1), 'not the run record'],
    ['a second run record', (r) => [...r, r[0]!], 'is a second run record'],
    [
      'an inventory the inventory schema refuses',
      (r) => r.map((x) => (x.type === 'run' ? { ...x, inventory: { ...(x.inventory as object), kind: 'Runbook' } } : x)),
      'its inventory is not valid: this is a Runbook; expected an Inventory',
    ],
  ];
  it.each(broken)('refuses %s (exit 2, JOURNAL_INVALID), naming where it came from', async (_, change, why) => {
    const t = text(change(lines(await engineJournal())));
    await expect(checkJournalText(t, WHERE, 'run-test')).rejects.toMatchObject({
      code: 'JOURNAL_INVALID',
      exit: 2,
      message: expect.stringMatching(new RegExp(`^${WHERE}: .*${why.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*; nothing was run$`)),
    });
  });

  it('refuses a line that is not JSON, even the last', async () => {
    await expect(checkJournalText(`${await engineJournal()}{"type":"end"`, WHERE, 'run-test')).rejects.toMatchObject({
      code: 'JOURNAL_INVALID',
      message: expect.stringContaining('is not JSON'),
    });
  });
});
