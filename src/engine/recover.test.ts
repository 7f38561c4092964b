import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEADMAN_ROOT } from './deadman.js';
import { Journal, listJournals, outstanding, readJournal } from '../journal/journal.js';
import { acquireRunLock, RUN_LOCK_NAME } from './run-lock-lease.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { parseInventoryLoosely } from '../testing/loose-inventory.js';
import { testInventory } from '../testing/engine-harness.js';
import { silentLogger } from '../core/logger.js';
import { recoverRun } from './recover.js';
import { defaultRegistry } from './registry.js';
import { realNodesCtx } from '../testing/real-nodes-ctx.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { realClock } from '../core/clock.js';
import { childRunbook } from '../testing/child-runbook.js';
import type { RequestOptions } from '../kube/http.js';

// The child imports the built engine (dist/): `npm test` builds first.
const dir = mkdtempSync(join(tmpdir(), 'kr-recover-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('recover in a fresh process', () => {
  it('reverts, from the journal alone, a fault applied by a process killed with SIGKILL', async () => {
    const marker = join(dir, 'applied');
    const runbookFile = join(dir, 'runbook.json');
    writeFileSync(runbookFile, childRunbook('recover-test', `touch '${marker}'`, `rm -f '${marker}'; echo reverted >>'${dir}/log'`));
    const journals = join(dir, 'runs');
    const child = spawn(process.execPath, ['test/fixtures/engine-child.mjs', runbookFile, journals], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('applied') && resolve());
      child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(existsSync(marker)).toBe(true);
    expect(existsSync(join(DEADMAN_ROOT, 'child-run'))).toBe(true);

    const [file] = listJournals(journals);
    const view = readJournal(file!);
    expect(view.status).toBeUndefined();
    expect(outstanding(view).map((f) => f.prepared.action)).toEqual(['run-command']);

    const inventory = view.run.inventory;
    const result = await recoverRun(view, {
      ctx: realNodesCtx(view.run.runId, inventory, fakeKubeAccess(realClock, { context: 'lab' })),
      registry: defaultRegistry,
      emit: () => {},
    });
    expect(result.errors).toEqual([]);
    expect(result.reverted.map((f) => `${f.action}@${f.node}`)).toEqual(['run-command@here']);
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(join(dir, 'log'), 'utf8')).toBe('reverted\n');
    expect(existsSync(join(DEADMAN_ROOT, 'child-run'))).toBe(false);
    // the journal now says so: a second recover has nothing to do, and the killed run has ended
    expect(outstanding(readJournal(file!))).toEqual([]);
    expect(readJournal(file!).status).toBe('interrupted');
  });
});

describe('recover deletes the API objects a cluster-side action left', () => {
  it("shed-apiserver-load's FlowSchema and priority level, by name from the journal alone", async () => {
    const file = join(dir, 'run-shed.jsonl');
    const j = new Journal(file);
    const inventory = parseInventoryLoosely(testInventory());
    j.append({
      type: 'run',
      at: 0,
      runId: 'run-shed',
      runbookFile: 'shed-apiserver-load.yaml',
      runbookName: 'shed-apiserver-load',
      inventoryFile: 'inventory.yaml',
      inventory,
      context: 'lab',
      allowContexts: ['*'],
      lockNamespace: 'kube-system',
      faultTtlMs: 60_000,
      pid: 4242,
      host: 'another-host',
    });
    const state = {
      level: { metadata: { name: 'kube-runbook-shed-run-shed-x' } },
      schemas: [{ metadata: { name: 'kube-runbook-shed-run-shed-x-1' } }],
      shed: ['the FlowSchema service-accounts (workload-low)'],
    };
    const step = 'shed the busiest clients';
    j.append({ type: 'prepared', at: 1, faultId: 'f01', action: 'shed-apiserver-load', step, remediation: false, state, deadman: false });
    j.append({ type: 'applied', at: 2, faultId: 'f01', state });
    j.close();
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const deleted: string[] = [];
    const json = kube.json!.bind(kube);
    kube.json = async <T>(path: string, opts?: RequestOptions): Promise<T> => {
      if (opts?.method !== 'DELETE') return json<T>(path, opts);
      deleted.push(path);
      return {} as T;
    };
    const ctx = { runId: 'run-shed', clock, log: silentLogger, signal: new AbortController().signal, dryRun: false, inventory, kube };
    const result = await recoverRun(readJournal(file), {
      ctx: { ...ctx, nodes: new FakeNodes(inventory.spec.nodes) },
      registry: defaultRegistry,
      emit: () => {},
    });
    expect(result.errors).toEqual([]);
    expect(deleted).toEqual([
      '/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/kube-runbook-shed-run-shed-x-1',
      '/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/kube-runbook-shed-run-shed-x',
    ]);
    expect(outstanding(readJournal(file))).toEqual([]);
  });
});

describe('recover tells a live run by the holder of its lock, not by the machine', () => {
  const journalOf = (runId: string) => {
    const file = join(dir, `${runId}.jsonl`);
    const j = new Journal(file);
    const inventory = parseInventoryLoosely(testInventory());
    j.append({
      type: 'run',
      at: 0,
      runId,
      runbookFile: 'rb.yaml',
      runbookName: 'rb',
      inventoryFile: 'inventory.yaml',
      inventory,
      context: 'lab',
      allowContexts: ['lab'],
      lockNamespace: 'kube-system',
      faultTtlMs: 60_000,
      // another machine: its pid means nothing here
      pid: 4242,
      host: 'another-host',
    });
    j.close();
    return readJournal(file);
  };
  const ctxOf = (clock: FakeClock, kube: ReturnType<typeof fakeKubeAccess>, runId: string) => {
    const inventory = parseInventoryLoosely(testInventory());
    return {
      runId,
      clock,
      log: silentLogger,
      signal: new AbortController().signal,
      dryRun: false,
      inventory,
      kube,
      nodes: new FakeNodes(inventory.spec.nodes),
    };
  };

  /** The cluster-wide run lock, taken just now by RUNID's executor at WHERE (2 min, renewed every 15 s). */
  const lockHeldBy = (clock: FakeClock, kube: ReturnType<typeof fakeKubeAccess>, runId: string, where: string) =>
    acquireRunLock(kube, { namespace: 'kube-system', runId, where, durationMs: 120_000, now: () => clock.now(), renewEveryMs: 15_000 });

  it('refuses while the run on another machine renews its lock, and takes and releases the lock once it has stopped renewing', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const view = journalOf('run-elsewhere');
    await lockHeldBy(clock, kube, 'run-elsewhere', 'ops@another-host pid 4242');
    const recover = () => recoverRun(view, { ctx: ctxOf(clock, kube, 'run-elsewhere'), registry: defaultRegistry, emit: () => {} });
    await expect(recover()).rejects.toMatchObject({
      code: 'RUN_STILL_ACTIVE',
      message: expect.stringContaining('its executor (ops@another-host pid 4242) renewed the cluster-wide run lock'),
    });
    // two renewals missed and 15 s more: that process is gone
    await clock.advance(46_000);
    const r = await recover();
    expect(r.errors).toEqual([]);
    expect(
      (kube.leases.get(`kube-system/${RUN_LOCK_NAME}`) as unknown as { spec: { holderIdentity?: string } }).spec.holderIdentity,
    ).toBeUndefined();
  });

  it('refuses while another run holds the lock and lives, naming it', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const view = journalOf('run-old');
    await lockHeldBy(clock, kube, 'run-new', 'ops@host-b pid 7');
    await expect(recoverRun(view, { ctx: ctxOf(clock, kube, 'run-old'), registry: defaultRegistry, emit: () => {} })).rejects.toMatchObject(
      {
        code: 'RUN_LOCKED',
        message: expect.stringContaining('run run-new (ops@host-b pid 7)'),
      },
    );
  });
});
