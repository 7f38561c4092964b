import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BIN, cliLab, killAfterEach } from './helpers/cli-lab.js';
import { writeRunbookYaml } from './helpers/runbook-file.js';

/** Two `run`s at once against one lab: the second is refused (exit 3) naming the first's run id, and applies nothing. */
const INSTANCE = 's11a';
const fx = cliLab(INSTANCE, { recoverAfter: true });
let first: ChildProcess | undefined;

killAfterEach(() => first);

function runbook(name: string, node: string): string {
  return writeRunbookYaml(
    fx.work,
    name,
    fx.lab.context,
    'faultTtl: 2m',
    `    - {name: stop a kubelet, action: stop-kubelet, with: {nodes: {names: [${node}]}}}
    - {name: hold, wait: 5m}
`,
  );
}

const kubeletRunning = async (node: string) =>
  (await fx.nodes.exec(node, `${fx.lab.stateDir}/nodes/${node}/kubelet/status`, { timeoutMs: 20_000 })).code === 0;

describe('the cluster-wide run lock on the lab', () => {
  it('a second run while the first has a fault applied exits 3 naming the first run id; nothing of it is applied', async () => {
    const out: string[] = [];
    const runId = await new Promise<string>((resolvePromise, reject) => {
      const c = spawn(process.execPath, [BIN, 'run', runbook('lock-first', 'node-1'), '-i', fx.lab.inventoryFile, '--yes'], {
        env: fx.env(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      first = c;
      let id = '';
      const onData = (d: Buffer) => {
        out.push(d.toString());
        const text = out.join('');
        id ||= /run (\S+): /.exec(text)?.[1] ?? '';
        if (/applied stop-kubelet on node-1/.test(text)) resolvePromise(id);
      };
      c.stdout!.on('data', onData);
      c.stderr!.on('data', onData);
      c.on('exit', (code) => reject(new Error(`the first run ended (exit ${code}) before its fault was applied:\n${out.join('')}`)));
    });
    expect(runId).not.toBe('');
    expect(await kubeletRunning('node-1')).toBe(false);

    const second = spawnSync(process.execPath, [BIN, 'run', runbook('lock-second', 'node-2'), '-i', fx.lab.inventoryFile, '--yes'], {
      env: fx.env(),
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(second.status, `${second.stdout}\n${second.stderr}`).toBe(3);
    expect(second.stdout).toContain(
      `another run holds the cluster-wide run lock (Lease kube-system/kube-runbook-run-lock): run ${runId} (`,
    );
    expect(second.stdout).not.toMatch(/applied stop-kubelet/);
    expect(await kubeletRunning('node-2')).toBe(true);

    // the first run ends normally on SIGTERM: rolled back, lock released, a new run may start
    const ended = new Promise<number | null>((r) => first!.once('exit', (code) => r(code)));
    first!.kill('SIGTERM');
    expect(await ended).toBe(130);
    expect(await kubeletRunning('node-1')).toBe(true);
    const dry = spawnSync(process.execPath, [BIN, 'run', runbook('lock-third', 'node-2'), '-i', fx.lab.inventoryFile, '--dry-run'], {
      env: fx.env(),
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(dry.stdout).toContain('preflight ok   run lock: no other run holds Lease kube-system/kube-runbook-run-lock');
    expect(dry.status, `${dry.stdout}\n${dry.stderr}`).toBe(0);
  });
});
