import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logger.js';
import { Journal, outstanding, readJournal } from '../engine/journal.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import type { RequestOptions } from '../kube/http.js';
import { configMapCopy, fetchJournalCopies, prepareJournalConfigMap } from './journal-copy.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-journal-copy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const REF = { namespace: 'kube-runbook', name: 'kube-runbook-rb-journal' };
const PATH = '/api/v1/namespaces/kube-runbook/configmaps/kube-runbook-rb-journal';

/** The one ConfigMap, as the apiserver keeps it: GET, and JSON merge patch (null removes a key); 403 for any other name. */
function clusterWith(given: Record<string, string> | undefined) {
  const data = given;
  const calls: { method: string; body?: unknown }[] = [];
  const kube = {
    contextName: 'in-cluster',
    server: 'https://10.96.0.1:443',
    async json<T>(path: string, o: RequestOptions = {}): Promise<T> {
      if (path !== PATH || !data) throw new ApiStatusError(path === PATH ? 404 : 403, `configmaps ${path} forbidden or missing`);
      calls.push({ method: o.method ?? 'GET', body: o.body });
      if (o.method === 'PATCH') {
        expect(o.contentType).toBe('application/merge-patch+json');
        for (const [k, v] of Object.entries((o.body as { data: Record<string, string | null> }).data))
          if (v === null) delete data[k];
          else data[k] = v;
      }
      return { data: { ...data } } as T;
    },
  } as unknown as KubeAccess;
  return { kube, calls, data: data ?? {} };
}

const line = (r: object) => JSON.stringify(r) + '\n';
const runRecord = (runId: string) =>
  line({
    type: 'run',
    at: 1,
    runId,
    runbookFile: 'rb.yaml',
    runbookName: 'rb',
    inventoryFile: 'inv.yaml',
    inventory: {},
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

describe('the journal kept in a ConfigMap', () => {
  it('before a run: removes the journals of runs that ended with nothing applied, keeps a killed run with a fault applied', async () => {
    const killed = runRecord('r-killed') + prepared + line({ type: 'applied', at: 3, faultId: 'f01-block', state: {} });
    const ended =
      runRecord('r-ended') +
      prepared +
      line({ type: 'reverted', at: 4, faultId: 'f01-block', by: 'executor' }) +
      line({ type: 'end', at: 5, status: 'passed' });
    const c = clusterWith({ 'r-killed.jsonl': killed, 'r-ended.jsonl': ended });
    expect(await prepareJournalConfigMap(c.kube, REF)).toEqual({ removed: ['r-ended'], applied: [{ runId: 'r-killed', faults: 1 }] });
    expect(Object.keys(c.data)).toEqual(['r-killed.jsonl']);
  });

  it('before a run: a ConfigMap that is missing or not allowed refuses the run (exit 3), naming it', async () => {
    await expect(prepareJournalConfigMap(clusterWith(undefined).kube, REF)).rejects.toMatchObject({
      exit: 3,
      message: expect.stringContaining('cannot read the journal ConfigMap kube-runbook/kube-runbook-rb-journal: configmaps'),
    });
  });

  it("a run's journal goes to its own key as it is written; other runs' keys are left as they are", async () => {
    const c = clusterWith({ 'r-other.jsonl': runRecord('r-other') });
    const j = Journal.forRun('r-now', dir, configMapCopy(c.kube, REF, 'r-now', silentLogger));
    j.append(JSON.parse(runRecord('r-now')) as never);
    j.append(JSON.parse(prepared) as never);
    expect(await j.synced()).toBe(true);
    j.close();
    expect(c.data['r-now.jsonl']).toBe(readFileSync(j.file, 'utf8'));
    expect(c.data['r-other.jsonl']).toBe(runRecord('r-other'));
    expect(c.calls.every((x) => x.method === 'PATCH' && Object.keys((x.body as { data: object }).data).join() === 'r-now.jsonl')).toBe(
      true,
    );
  });

  it('recover --from-cluster: a journal the machine lacks (the pod and its disk are gone) is written where recover reads', async () => {
    const text = runRecord('r-gone') + prepared + line({ type: 'applied', at: 3, faultId: 'f01-block', state: {} });
    const c = clusterWith({ 'r-gone.jsonl': text });
    const state = join(dir, 'fresh-state');
    expect([...(await fetchJournalCopies(c.kube, REF, state))]).toEqual(['r-gone']);
    const view = readJournal(join(state, 'r-gone.jsonl'));
    expect(outstanding(view).map((f) => [f.prepared.faultId, f.applied])).toEqual([['f01-block', true]]);
  });

  it('recover --from-cluster: a longer local journal (recover already reverted here) is not replaced by a shorter copy', async () => {
    const state = join(dir, 'longer');
    const local = runRecord('r-both') + prepared + line({ type: 'reverted', at: 4, faultId: 'f01-block', by: 'recover' });
    await fetchJournalCopies(clusterWith({ 'r-both.jsonl': local }).kube, REF, state);
    await fetchJournalCopies(clusterWith({ 'r-both.jsonl': runRecord('r-both') + prepared }).kube, REF, state);
    expect(readFileSync(join(state, 'r-both.jsonl'), 'utf8')).toBe(local);
  });
});
