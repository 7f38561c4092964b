import { spawn } from 'node:child_process';
import { basename } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LAB_BIN, LAB_VERSION, labBinaries, labCli, leftovers, stopLab, until } from './helpers/lab.js';

/** `lab down` leaves nothing of an instance: after a normal `up`, and after `up` was killed half-way. */
const INSTANCE = 'e2edn';

afterAll(async () => {
  await stopLab(INSTANCE);
});

/** Starts `lab up` and SIGKILLs it once its progress output shows `step`. */
async function killUpAt(step: string): Promise<string> {
  await labBinaries();
  const child = spawn(process.execPath, [LAB_BIN, 'up', '--instance', INSTANCE, '--nodes', '2', '--kubernetes-version', LAB_VERSION], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
  await until(`lab up to reach "${step}"`, () => stderr.includes(step), 120_000, 20);
  child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  return stderr;
}

describe('lab down', () => {
  it.each([
    ['the control plane is starting', 'lab: kube-apiserver ('],
    ['the kubelets run', 'lab: waiting for'],
  ])('cleans up after lab up was killed while %s', async (_when, step) => {
    await killUpAt(step);
    const left = await leftovers(INSTANCE);
    expect(left.some((l) => l.startsWith('netns '))).toBe(true);
    expect(left.some((l) => l.startsWith('process '))).toBe(true);
    expect(left.some((l) => l.startsWith('iptables '))).toBe(true);
    expect(left.some((l) => l.startsWith('cgroup '))).toBe(true);

    const down = await labCli(['down', '--instance', INSTANCE]);
    expect(down.code, down.stderr).toBe(0);
    expect(await leftovers(INSTANCE)).toEqual([]);
  });

  it('is idempotent, and an up after a down works', async () => {
    const again = await labCli(['down', '--instance', INSTANCE]);
    expect(again.code, again.stderr).toBe(0);
    expect(await leftovers(INSTANCE)).toEqual([]);
    const up = await labCli(['up', '--instance', INSTANCE, '--nodes', '1', '--kubernetes-version', LAB_VERSION]);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toContain(`lab ${INSTANCE} is up`);
    const refused = await labCli(['up', '--instance', INSTANCE, '--nodes', '1', '--kubernetes-version', LAB_VERSION]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('LAB_ALREADY_UP');
    const down = await labCli(['down', '--instance', INSTANCE, '--json']);
    expect(down.code, down.stderr).toBe(0);
    const report = JSON.parse(down.stdout) as { processes: number; netns: string[]; chains: string[]; cgroups: string[] };
    // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, one kubelet (and the shells restarting the two controllers)
    expect(report.processes).toBeGreaterThanOrEqual(5);
    expect(report.netns.sort()).toEqual(['kr-e2edn-cp-1', 'kr-e2edn-node-1']);
    expect(report.chains).toEqual(['KR-e2edn-FWD']);
    // etcd's blkio (or io) cgroup, and cp-1's tree of one cpu cgroup per component
    expect(report.cgroups.map((c) => basename(c)).sort()).toEqual(['kube-runbook-e2edn-cp-1', 'kube-runbook-e2edn-etcd']);
    expect(await leftovers(INSTANCE)).toEqual([]);
  });
});
