import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { realClock } from '../core/clock.js';
import { DEADMAN_ROOT } from './deadman.js';
import { listJournals, outstanding, readJournal } from './journal.js';
import { silentLogger } from '../core/logger.js';
import { recoverRun } from './recover.js';
import { defaultRegistry } from './registry.js';
import { createNodeAccess } from '../nodes/access.js';
import { fakeKubeAccess } from '../testing/fake-access.js';

// The child imports the built engine (dist/): `npm test` builds first.
const dir = mkdtempSync(join(tmpdir(), 'kr-recover-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('recover in a fresh process', () => {
  it('reverts, from the journal alone, a fault applied by a process killed with SIGKILL', async () => {
    const marker = join(dir, 'applied');
    const runbookFile = join(dir, 'runbook.json');
    writeFileSync(
      runbookFile,
      JSON.stringify({
        apiVersion: 'kube-runbook/v1',
        kind: 'Runbook',
        metadata: { name: 'recover-test' },
        spec: {
          safety: { allowContexts: ['lab'], faultTtl: '10m' },
          steps: [
            { action: 'run-command', with: { nodes: 'all', apply: `touch '${marker}'`, revert: `rm -f '${marker}'; echo reverted >>'${dir}/log'` } },
            { wait: '10m' },
          ],
        },
      }),
    );
    const journals = join(dir, 'runs');
    const child = spawn(process.execPath, ['test/fixtures/engine-child.mjs', runbookFile, journals], { stdio: ['ignore', 'pipe', 'inherit'] });
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
      ctx: {
        runId: view.run.runId,
        clock: realClock,
        log: silentLogger,
        signal: new AbortController().signal,
        dryRun: false,
        inventory,
        kube: fakeKubeAccess(realClock, { context: 'lab' }),
        nodes: createNodeAccess(inventory),
      },
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
