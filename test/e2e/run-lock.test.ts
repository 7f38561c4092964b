import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BIN, cliLab, killAfterEach } from './helpers/cli-lab.js';
import { writeRunbookYaml } from './helpers/runbook-file.js';

/**
 * Two `run`s at once against one lab: the second is refused (exit 3) naming the first's run id, and applies nothing;
 * then `halt` from another process ends the first (rolled back, HALTED) and refuses the next run until `resume`.
 */
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

/** The CLI's halt, resume or status against the lab, from a process of its own. */
const haltCli = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args, '--kubeconfig', fx.lab.kubeconfig, '--context', fx.lab.context], {
    env: fx.env(),
    encoding: 'utf8',
    timeout: 120_000,
  });

describe('the cluster-wide run lock and the halt on the lab', () => {
  it('a second run while the first has a fault applied exits 3 naming the first run id; a halt rolls the first back and refuses runs until resume', async () => {
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

    // halted from another process: the first run rolls back within seconds of it, ends HALTED (exit 1), its
    // kubelet running again as the node itself says; the lock released
    const ended = new Promise<number | null>((r) => first!.once('exit', (code) => r(code)));
    const halt = haltCli('halt', '--reason', 'e2e outage', '--by', 'e2e@lab');
    expect(halt.status, `${halt.stdout}\n${halt.stderr}`).toBe(0);
    expect(halt.stdout).toMatch(/^halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage: every run rolls back/);
    const haltedAt = Date.now(); // eslint-disable-line no-restricted-syntax -- a bound on a real process's reaction, with margin
    expect(await ended).toBe(1);
    expect(Date.now() - haltedAt).toBeLessThan(60_000); // eslint-disable-line no-restricted-syntax -- idem
    expect(out.join('')).toMatch(/HALTED: halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage/);
    expect(await kubeletRunning('node-1')).toBe(true);
    const refused = spawnSync(process.execPath, [BIN, 'run', runbook('lock-halted', 'node-2'), '-i', fx.lab.inventoryFile, '--yes'], {
      env: fx.env(),
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(refused.status, `${refused.stdout}\n${refused.stderr}`).toBe(3);
    expect(refused.stdout).toMatch(/halt: halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage/);
    expect(refused.stdout).not.toMatch(/applied stop-kubelet/);
    expect(await kubeletRunning('node-2')).toBe(true);
    const plan = spawnSync(process.execPath, [BIN, 'plan', runbook('lock-halted', 'node-2'), '-i', fx.lab.inventoryFile], {
      env: fx.env(),
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(plan.stdout).toMatch(
      /^HALTED: halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage; a run is refused/m,
    );
    const status = haltCli('status');
    expect(status.stdout).toContain('HALTED: halted by e2e@lab');
    expect(status.stdout).toContain('run lock: free');
    const resume = haltCli('resume', '--by', 'e2e@lab');
    expect(resume.stdout).toMatch(/^resumed by e2e@lab at \S+ \(Lease kube-system\/kube-runbook-halt\): runs may start again/);
    expect(resume.status).toBe(0);
    const dry = spawnSync(process.execPath, [BIN, 'run', runbook('lock-third', 'node-2'), '-i', fx.lab.inventoryFile, '--dry-run'], {
      env: fx.env(),
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(dry.stdout).toContain('preflight ok   run lock: no other run holds Lease kube-system/kube-runbook-run-lock');
    expect(dry.stdout).toContain('preflight ok   halt: no halt is set (Lease kube-system/kube-runbook-halt)');
    expect(dry.status, `${dry.stdout}\n${dry.stderr}`).toBe(0);
  });
});
