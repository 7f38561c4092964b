import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { BIN, cliLab, killAfterEach } from './helpers/cli-lab.js';

/**
 * The executor killed with SIGKILL right after applying faults: the node-side dead-man reverts them within
 * faultTtl + 5 s; and, with a long faultTtl, `kube-runbook recover` reverts them at once.
 */
const INSTANCE = 'act2';
const fx = cliLab(INSTANCE);
let child: ChildProcess | undefined;

killAfterEach(() => child);

const sleep = (ms: number) => realClock.sleep(ms);

function runbook(name: string, faultTtl: string): string {
  const file = join(fx.work, `${name}.yaml`);
  writeFileSync(
    file,
    `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: ${name}}
spec:
  safety: {allowContexts: [${JSON.stringify(fx.lab.context)}], faultTtl: ${faultTtl}, maxDuration: 10m, maxUnavailable: {worker: 2}}
  steps:
    - {name: cut node-1 off, action: block-kubelet-egress, with: {nodes: {names: [node-1]}}}
    - {name: stop node-2's kubelet, action: stop-kubelet, with: {nodes: {names: [node-2]}}}
    - {name: hold, wait: 5m}
`,
  );
  return file;
}

/** Starts `kube-runbook run`; resolves with the run id once both faults are applied. */
function startRun(file: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const c = spawn(process.execPath, [BIN, 'run', file, '-i', fx.lab.inventoryFile, '--yes', '-o', 'text'], {
      env: fx.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = c;
    let out = '';
    let runId = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      runId ||= /run (\S+): /.exec(out)?.[1] ?? '';
      if (/applied block-kubelet-egress on node-1/.test(out) && /applied stop-kubelet on node-2/.test(out)) resolvePromise(runId);
    };
    c.stdout!.on('data', onData);
    c.stderr!.on('data', onData);
    c.on('exit', (code) => reject(new Error(`the run ended (exit ${code}) before both faults were applied:\n${out}`)));
  });
}

const sh = (node: string, script: string) => fx.nodes.exec(node, script, { timeoutMs: 20_000 });
const chainGone = async () => !(await sh('node-1', 'iptables -w -S')).stdout.includes('KR-EGRESS');
const kubeletBack = async () => (await sh('node-2', `${fx.lab.stateDir}/nodes/node-2/kubelet/health`)).code === 0;
const kubeletStopped = async () => (await sh('node-2', `${fx.lab.stateDir}/nodes/node-2/kubelet/status`)).code === 3;

async function bothReverted(timeoutMs: number): Promise<number> {
  const t0 = realClock.now();
  while (realClock.now() - t0 < timeoutMs) {
    if ((await chainGone()) && (await kubeletBack())) return realClock.now() - t0;
    await sleep(200);
  }
  throw new Error(`faults still applied ${timeoutMs} ms after the executor was killed`);
}

describe('executor killed with SIGKILL right after apply', () => {
  it('the node-side dead-man reverts every fault within faultTtl + 5 s', async () => {
    const ttlMs = 10_000;
    const runId = await startRun(runbook('act-deadman', '10s'));
    expect(await chainGone()).toBe(false);
    expect(await kubeletStopped()).toBe(true);
    child!.kill('SIGKILL');
    const took = await bothReverted(ttlMs + 5000);
    console.log(`dead-man: both faults reverted ${(took / 1000).toFixed(1)} s after SIGKILL (faultTtl 10 s)`);
    expect(took).toBeLessThanOrEqual(ttlMs + 5000);
    // the journal still lists both faults: recover finds them reverted, says the dead-man did it, and clears its records
    // (--force: the killed executor renewed the run lock seconds ago, so recover cannot tell it dead by the lock yet)
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).toContain('had already reverted');
    const left = await sh('node-1', `ls -d /var/lib/kube-runbook/deadman/${runId}/* 2>/dev/null || true`);
    expect(left.stdout.trim(), 'dead-man records left').toBe('');
  });

  it('`kube-runbook recover` reverts them at once and disarms the dead-men', async () => {
    const runId = await startRun(runbook('act-recover', '10m'));
    child!.kill('SIGKILL');
    await sleep(500);
    expect(await chainGone()).toBe(false);
    const t0 = realClock.now();
    // at once: the operator who killed it says so (--force), since its lock was renewed a moment ago
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    const took = realClock.now() - t0;
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(await chainGone()).toBe(true);
    expect(await kubeletBack()).toBe(true);
    console.log(`recover: both faults reverted in ${(took / 1000).toFixed(1)} s (faultTtl 10 m)`);
    const armed = await sh('node-1', `ls -d /var/lib/kube-runbook/deadman/${runId}/* 2>/dev/null | grep -v '[.]fired$' || true`);
    expect(armed.stdout.trim(), 'no dead-man left armed').toBe('');
  });
});
