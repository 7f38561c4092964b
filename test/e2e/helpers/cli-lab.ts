import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { loadInventory } from '../../../src/inventory/load.js';
import { createNodeAccess } from '../../../src/nodes/access.js';
import type { NodeAccess } from '../../../src/nodes/types.js';
import { startLab, stopLab, type LabInfo } from './lab.js';

/** The CLI as the tests start it in a child process. */
export const BIN = resolve('bin/kube-runbook.js');

/** A lab of two workers without a workload, for tests that drive the CLI: what they reach it by. */
export interface CliLab {
  lab: LabInfo;
  /** The lab's nodes, to look at them the way a person would. */
  nodes: NodeAccess;
  /** A directory of the test's own: runbooks it writes, and the CLI's state directory under it. */
  work: string;
  /** The CLI's environment: its state directory in `work`, no colours. */
  env(): NodeJS.ProcessEnv;
}

/**
 * Starts such a lab before the file's tests and removes it after them (with `recoverAfter`, after `recover --all` has
 * undone whatever a failed test left applied).
 */
export function cliLab(instance: string, o: { recoverAfter?: boolean } = {}): CliLab {
  const fx: CliLab = {
    lab: undefined as unknown as LabInfo,
    nodes: undefined as unknown as NodeAccess,
    work: '',
    env: () => ({ ...process.env, KUBE_RUNBOOK_STATE_DIR: join(fx.work, 'state'), NO_COLOR: '1' }),
  };
  beforeAll(async () => {
    fx.lab = await startLab({ instance, nodes: 2, workload: false });
    fx.nodes = createNodeAccess((await loadInventory(fx.lab.inventoryFile)).inventory);
    fx.work = mkdtempSync(join(tmpdir(), `kr-e2e-${instance}-`));
  });
  afterAll(async () => {
    if (o.recoverAfter && fx.work)
      spawnSync(process.execPath, [BIN, 'recover', '--all', '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    await stopLab(instance);
    if (fx.work) rmSync(fx.work, { recursive: true, force: true });
  });
  return fx;
}

/** SIGKILLs after each test the CLI process `running` gives, if it still runs (a test that failed half-way). */
export function killAfterEach(running: () => ChildProcess | undefined): void {
  afterEach(() => {
    const c = running();
    if (c && c.exitCode === null) c.kill('SIGKILL');
  });
}
