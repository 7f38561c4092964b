import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { memoryLogger, silentLogger } from '../core/logger.js';
import { Journal, outstanding, readJournal } from './journal.js';
import { ensureJournalKey, JournalKey } from './key.js';
import { JOURNAL_REF as REF, journalCluster } from '../testing/journal-cluster.js';
import { configMapCopy, fetchJournalCopies, openClusterCopy } from './cluster-copy.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-journal-copy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const KEY = new JournalKey(Buffer.alloc(32, 1));
const SECRET = { key: Buffer.alloc(32, 1).toString('base64') };

const line = (r: object) => JSON.stringify(r) + '\n';
const runRecord = (runId: string) =>
  line({
    type: 'run',
    at: 1,
    runId,
    runbookFile: 'rb.yaml',
    runbookName: 'rb',
    inventoryFile: 'inv.yaml',
    inventory: {
      apiVersion: 'kube-runbook/v1',
      kind: 'Inventory',
      metadata: { name: 'x' },
      spec: { layout: 'k3s', nodes: [{ name: 'node-1' }] },
    },
    context: 'in-cluster',
    faultTtlMs: 60_000,
    pid: 1,
    host: 'pod',
  });
const prepared = line({
  type: 'prepared',
  at: 2,
  faultId: 'f01-block',
  action: 'run-command',
  node: 'node-1',
  step: '2 cut',
  remediation: false,
  state: {},
  deadman: true,
});
/** A run's journal and its MAC, as the ConfigMap keeps them. */
const signed = (runId: string, text: string, key = KEY) => ({ [`${runId}.jsonl`]: text, [`${runId}.hmac`]: key.mac(REF, runId, text) });

describe('the journal kept in a ConfigMap', () => {
  it('before a run: removes the journals of runs that ended with nothing applied, keeps a killed run with a fault applied', async () => {
    const killed = runRecord('r-killed') + prepared + line({ type: 'applied', at: 3, faultId: 'f01-block', state: {} });
    const ended =
      runRecord('r-ended') +
      prepared +
      line({ type: 'reverted', at: 4, faultId: 'f01-block', by: 'executor' }) +
      line({ type: 'end', at: 5, status: 'passed' });
    const forged = runRecord('r-forged') + prepared;
    const c = journalCluster({
      configMap: { ...signed('r-killed', killed), 'r-ended.jsonl': ended, 'r-forged.jsonl': forged },
      secret: SECRET,
    });
    expect(await openClusterCopy(c.kube, REF, 'r-now', silentLogger)).toEqual({
      copy: expect.objectContaining({ write: expect.any(Function) }),
      removed: ['r-ended'],
      applied: [{ runId: 'r-killed', faults: 1 }],
      unsigned: ['r-forged'],
    });
    expect(Object.keys(c.configMap).sort()).toEqual(['r-forged.jsonl', 'r-killed.hmac', 'r-killed.jsonl']);
  });

  it('before a run: a ConfigMap that is missing or not allowed refuses the run (exit 3), naming it', async () => {
    await expect(openClusterCopy(journalCluster({ secret: SECRET }).kube, REF, 'r-now', silentLogger)).rejects.toMatchObject({
      exit: 3,
      message: expect.stringContaining('cannot read the journal ConfigMap kube-runbook/kube-runbook-rb-journal: /api'),
    });
  });

  it('before a run: a missing key Secret refuses the run (exit 3), saying how to make it; an unreadable one too', async () => {
    await expect(openClusterCopy(journalCluster({ configMap: {} }).kube, REF, 'r-now', silentLogger)).rejects.toMatchObject({
      code: 'JOURNAL_KEY_MISSING',
      exit: 3,
      message: expect.stringContaining('kubectl -n kube-runbook create secret generic kube-runbook-rb-journal-key'),
    });
    const forbidden = journalCluster({
      configMap: {},
      secret: {},
      forbidden: ['/api/v1/namespaces/kube-runbook/secrets/kube-runbook-rb-journal-key'],
    });
    await expect(openClusterCopy(forbidden.kube, REF, 'r-now', silentLogger)).rejects.toMatchObject({
      code: 'JOURNAL_KEY_UNREADABLE',
      exit: 3,
    });
  });

  it('the first run draws the key into the empty Secret, by a patch conditional on what it read; later runs take it, never replace it', async () => {
    const c = journalCluster({ configMap: {}, secret: {} });
    const first = await ensureJournalKey(c.kube, REF);
    const patch = c.calls.find((x) => x.method === 'PATCH')!;
    expect(patch.body).toEqual({ metadata: { resourceVersion: '1' }, data: { key: c.secret!.key } });
    expect(Buffer.from(c.secret!.key!, 'base64')).toHaveLength(32);
    const again = await ensureJournalKey(c.kube, REF, () => Buffer.alloc(32, 9));
    expect(c.calls.filter((x) => x.method === 'PATCH')).toHaveLength(1);
    expect(again.mac(REF, 'r', 'text')).toBe(first.mac(REF, 'r', 'text'));
  });

  it('two runs drawing a key at once end with the one written first: the second patch is refused (409) and it takes that key', async () => {
    const c = journalCluster({ configMap: {}, secret: {} });
    const theirs = Buffer.alloc(32, 5);
    // another run writes its key between this one's read and its patch
    const key = await ensureJournalKey(c.kube, REF, () => (c.writeSecret({ key: theirs.toString('base64') }), Buffer.alloc(32, 6)));
    expect(c.secret!.key).toBe(theirs.toString('base64'));
    expect(key.mac(REF, 'r', 'text')).toBe(new JournalKey(theirs).mac(REF, 'r', 'text'));
  });

  it("a run's journal goes to its own key with its MAC as it is written; other runs' keys are left as they are; the key goes nowhere", async () => {
    const c = journalCluster({ configMap: { 'r-other.jsonl': runRecord('r-other') }, secret: {} });
    const log = memoryLogger();
    const { copy } = await openClusterCopy(c.kube, REF, 'r-now', log);
    const key = await ensureJournalKey(c.kube, REF);
    const j = Journal.forRun('r-now', dir, copy);
    j.append(JSON.parse(runRecord('r-now')) as never);
    j.append(JSON.parse(prepared) as never);
    expect(await j.synced()).toBe(true);
    j.close();
    const text = readFileSync(j.file, 'utf8');
    expect(c.configMap['r-now.jsonl']).toBe(text);
    expect(key.verifies(REF, 'r-now', text, c.configMap['r-now.hmac']!)).toBe(true);
    expect(c.configMap['r-other.jsonl']).toBe(runRecord('r-other'));
    const patches = c.calls.filter((x) => x.method === 'PATCH' && x.path.includes('/configmaps/')).slice(1);
    expect(patches.length).toBeGreaterThan(0);
    for (const x of patches) expect(Object.keys((x.body as { data: object }).data)).toEqual(['r-now.jsonl', 'r-now.hmac']);
    const secretKey = c.secret!.key!;
    for (const sink of [JSON.stringify(c.configMap), text, JSON.stringify(log.lines)])
      for (const form of [secretKey, Buffer.from(secretKey, 'base64').toString('hex')]) expect(sink).not.toContain(form);
  });

  it('recover --from-cluster: a journal the machine lacks (the pod and its disk are gone) is written where recover reads', async () => {
    const text = runRecord('r-gone') + prepared + line({ type: 'applied', at: 3, faultId: 'f01-block', state: {} });
    const c = journalCluster({ configMap: signed('r-gone', text), secret: SECRET });
    const state = join(dir, 'fresh-state');
    expect([...(await fetchJournalCopies(c.kube, REF, state)).runs]).toEqual(['r-gone']);
    const view = readJournal(join(state, 'r-gone.jsonl'));
    expect(outstanding(view).map((f) => [f.prepared.faultId, f.applied])).toEqual([['f01-block', true]]);
  });

  it('recover --from-cluster RUN: only that run is checked and taken', async () => {
    const text = runRecord('r-mine') + prepared;
    const c = journalCluster({ configMap: { ...signed('r-mine', text), 'r-else.jsonl': 'not even JSON\n' }, secret: SECRET });
    const state = join(dir, 'one-run');
    expect([...(await fetchJournalCopies(c.kube, REF, state, { runId: 'r-mine' })).runs]).toEqual(['r-mine']);
    await expect(fetchJournalCopies(c.kube, REF, state)).rejects.toMatchObject({ code: 'JOURNAL_UNSIGNED', exit: 2 });
  });

  it('recover --from-cluster: a longer local journal (recover already reverted here) is not replaced by a shorter copy', async () => {
    const state = join(dir, 'longer');
    const local = runRecord('r-both') + prepared + line({ type: 'reverted', at: 4, faultId: 'f01-block', by: 'recover' });
    await fetchJournalCopies(journalCluster({ configMap: signed('r-both', local), secret: SECRET }).kube, REF, state);
    await fetchJournalCopies(
      journalCluster({ configMap: signed('r-both', runRecord('r-both') + prepared), secret: SECRET }).kube,
      REF,
      state,
    );
    expect(readFileSync(join(state, 'r-both.jsonl'), 'utf8')).toBe(local);
  });

  it('recover of a copy taken unsigned, with no key in the Secret, writes it back with no MAC', async () => {
    const c = journalCluster({ configMap: {}, secret: {} });
    await configMapCopy(c.kube, REF, 'r-x', silentLogger, undefined).write('x\n');
    expect(c.configMap).toEqual({ 'r-x.jsonl': 'x\n' });
  });
});
