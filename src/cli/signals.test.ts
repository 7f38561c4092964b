import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEADMAN_ROOT } from '../engine/deadman.js';
import { listJournals, outstanding, readJournal } from '../journal/journal.js';
import { childRunbook } from '../testing/child-runbook.js';

// The child imports the built engine and this module (dist/): `npm test` builds first.
const dir = mkdtempSync(join(tmpdir(), 'kr-signals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a run in its own process', () => {
  it.each([
    ['SIGHUP', false],
    ['SIGTERM', false],
    ['SIGHUP', true],
  ] as const)('rolls back on %s (the session dropped; its terminal gone: %s) and exits with everything reverted', async (signal, gone) => {
    const marker = join(dir, `applied-${signal}-${gone}`);
    const runbookFile = join(dir, `runbook-${signal}-${gone}.json`);
    writeFileSync(runbookFile, childRunbook('hangup-test', `touch '${marker}'`, `rm -f '${marker}'`));
    const journals = join(dir, `runs-${signal}-${gone}`);
    const runId = `hup-${signal.toLowerCase()}-${gone}`;
    const child = spawn(process.execPath, ['test/fixtures/engine-child.mjs', runbookFile, journals, runId], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
        if (output.includes('applied')) resolve();
      });
      void exited.then((code) => reject(new Error(`child exited early (${code})`)));
    });
    expect(existsSync(marker)).toBe(true);
    // the terminal gone: every later write fails (EPIPE), the summary after the rollback too
    if (gone) child.stdout.destroy();
    child.kill(signal);
    expect(await exited).toBe(0);
    if (!gone) expect(output).toContain('ended interrupted');
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(DEADMAN_ROOT, runId))).toBe(false);
    const [file] = listJournals(journals);
    const view = readJournal(file!);
    expect(outstanding(view)).toEqual([]);
    expect(view.status).toBe('interrupted');
    expect(readFileSync(file!, 'utf8')).toContain('"by":"executor"');
  });
});
