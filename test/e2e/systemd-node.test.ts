/**
 * A node whose PID 1 is systemd (Debian's, booted on a root filesystem of its own that the lab's installer builds
 * with mmdebstrap), with containerd and the release's kubelet as enabled units and sshd, reached by the ssh
 * transport as a kubeadm node is: stop-kubelet's systemctl path, and the node dead-man's systemd path (a
 * `systemd-run` unit that fires after faultTtl once the executor is SIGKILLed; a boot unit that reverts after a
 * reboot). Every outcome is read on the node (systemctl, the units' journal, the dead-man's own record), not from the
 * executor. The kubelet runs standalone (no apiserver): its unit's control and /healthz are what is checked. Fails,
 * never skips, on a machine that cannot run it. No control plane: no lab lock.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { DEADMAN_MARGIN_MS } from '../../src/engine/deadman.js';
import { DEADMAN_ROOT } from '../../src/nodes/keepalive.js';
import { ensureLabBinaries } from '../../packages/lab/src/index.js';
import { distroMirror } from '../../packages/lab/src/install/apt.js';
import { ensureContainerd } from '../../packages/lab/src/install/containerd.js';
import { ensureKubelet } from '../../packages/lab/src/install/kubelet.js';
import { ensureSystemdRootfs } from '../../packages/lab/src/install/systemd-rootfs.js';
import { cacheDir } from '../../packages/lab/src/host/paths.js';
import {
  bootSystemdNode,
  inSystemdNode,
  killLeftoverSystemdNode,
  makeSystemdNodeNet,
  removeSystemdNodeNet,
  stopSystemdNode,
  systemdNodePaths,
  type SystemdNode,
} from '../../packages/lab/src/host/systemd-node.js';
import { writeSystemdNodeFiles } from '../../packages/lab/src/lifecycle/systemd-node-units.js';
import { eventually } from '../../src/testing/wait.js';

const NAME = 'krsd-1';
const net = { netns: NAME, hostIf: `${NAME}-h`, hostIp: '10.251.77.1', nodeIp: '10.251.77.2' };
const dir = mkdtempSync(join(tmpdir(), 'krsd-'));
const log = createLogger((level, msg) => process.stderr.write(`[systemd node] ${level}: ${msg}\n`));
let node: SystemdNode;
let pid = 0;
let inventoryFile = '';
const children: ChildProcess[] = [];

/** A command on the node, as root: exit code and output. */
async function onNode(argv: string[]): Promise<{ code: number; out: string }> {
  const r = await inSystemdNode(pid, argv);
  return { code: r.code, out: `${r.stdout}${r.stderr}` };
}
const isActive = async (unit: string) => (await onNode(['systemctl', 'is-active', unit])).out.trim();
const healthz = async () => (await onNode(['curl', '-s', '--max-time', '2', 'http://127.0.0.1:10248/healthz'])).out.trim();
const journal = async (unit: string, since: number) =>
  (await onNode(['journalctl', '--no-pager', '-o', 'cat', '-u', unit, '--since', `@${Math.floor(since / 1000)}`])).out;

function runbook(name: string, faultTtl: string, wait: string): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'kube-runbook/v1',
      kind: 'Runbook',
      metadata: { name },
      spec: {
        safety: { allowContexts: ['lab'], faultTtl, maxUnavailable: { worker: '100%' } },
        steps: [{ action: 'stop-kubelet', with: { nodes: 'all', timeout: '60s' } }, { wait }],
      },
    }),
  );
  return file;
}

/** The executor in a process of its own (test/fixtures/engine-child.mjs); resolves once stop-kubelet is applied. */
async function startRun(file: string, runId: string): Promise<{ child: ChildProcess; ended: Promise<string> }> {
  const child = spawn(process.execPath, ['test/fixtures/engine-child.mjs', file, join(dir, 'runs'), runId, inventoryFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const ended = new Promise<string>((resolve) => child.once('exit', () => resolve(out)));
  const applied = await eventually(() => out.includes('applied\n') || child.exitCode !== null, 120_000, 100);
  if (!applied || !out.includes('applied\n')) throw new Error(`the run did not apply stop-kubelet:\n${out}`);
  return { child, ended };
}

async function kill(child: ChildProcess): Promise<void> {
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}

/** A file of the fired dead-man's record on the node (`<root>/<run>/<fault>.fired/`), once its revert has ended. */
async function record(runId: string, file: string): Promise<string> {
  const d = `${DEADMAN_ROOT}/${runId}`;
  await eventually(async () => (await onNode(['sh', '-c', `cat ${d}/*.fired/exit`])).code === 0, 60_000, 250);
  return (await onNode(['sh', '-c', `cat ${d}/*.fired/${file}`])).out.trim();
}

/** Whether the run's dead-man units are gone from /etc/systemd/system (removed by its unhook, after the record's exit). */
const unitFilesGone = (runId: string) =>
  eventually(async () => (await onNode(['sh', '-c', `ls /etc/systemd/system | grep -c ${runId} || true`])).out.trim() === '0', 10_000, 250);

/** The kubelet unit active and /healthz ok within `ms`. */
const kubeletBack = (ms: number) => eventually(async () => (await isActive('kubelet')) === 'active' && (await healthz()) === 'ok', ms, 250);

beforeAll(async () => {
  const bin = await ensureLabBinaries({ log, kubernetesVersion: '1.37' });
  const root = cacheDir(process.env);
  const kubelet = await ensureKubelet({ log }, root, bin);
  const containerd = await ensureContainerd({ log }, root);
  const rootfs = await ensureSystemdRootfs({ log, ...(await distroMirror()) });
  node = {
    name: NAME,
    netns: net.netns,
    rootfs: rootfs.dir,
    dir: join(dir, 'node'),
    binds: { [join(kubelet, '..')]: '/opt/kube-runbook/kubernetes', [containerd.dir]: '/opt/kube-runbook/containerd' },
  };
  const upper = systemdNodePaths(node.dir).upper;
  await writeSystemdNodeFiles(upper, {
    node: NAME,
    kubeletDir: '/opt/kube-runbook/kubernetes',
    containerdDir: '/opt/kube-runbook/containerd',
  });
  // the executor's key, and the node's host key as known_hosts: the ssh transport checks it (strictHostKeyChecking yes)
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'id'), '-C', 'kube-runbook test']);
  mkdirSync(join(upper, 'root/.ssh'), { recursive: true, mode: 0o700 });
  writeFileSync(join(upper, 'root/.ssh/authorized_keys'), readFileSync(join(dir, 'id.pub')), { mode: 0o600 });
  const hostKey = readFileSync(join(rootfs.dir, 'etc/ssh/ssh_host_ed25519_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
  writeFileSync(join(dir, 'known_hosts'), `${net.nodeIp} ${hostKey}\n`);
  inventoryFile = join(dir, 'inventory.json');
  writeFileSync(
    inventoryFile,
    JSON.stringify({
      apiVersion: 'kube-runbook/v1',
      kind: 'Inventory',
      metadata: { name: 'systemd-node' },
      spec: {
        layout: 'kubeadm',
        transport: {
          type: 'ssh',
          user: 'root',
          identityFile: join(dir, 'id'),
          knownHostsFile: join(dir, 'known_hosts'),
          ignoreUserConfig: true,
        },
        nodes: [{ name: NAME, address: net.nodeIp, roles: ['worker'] }],
      },
    }),
  );
  // a previous run's, killed before its afterAll
  await killLeftoverSystemdNode(NAME, { clock: realClock });
  await removeSystemdNodeNet(net);
  await makeSystemdNodeNet(net);
  const t0 = realClock.now();
  pid = await bootSystemdNode(node, { clock: realClock });
  expect(await kubeletBack(60_000), 'the kubelet unit comes up at boot').toBe(true);
  console.log(`systemd node booted, kubelet healthy ${((realClock.now() - t0) / 1000).toFixed(1)} s after the boot began`);
}, 1_800_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  if (pid) await stopSystemdNode(NAME, pid, { clock: realClock });
  await removeSystemdNodeNet(net);
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('a node whose PID 1 is systemd', () => {
  it('is systemd as PID 1, with containerd and the kubelet as its units', async () => {
    expect((await onNode(['cat', '/proc/1/comm'])).out.trim()).toBe('systemd');
    expect((await onNode(['systemctl', 'is-system-running'])).out.trim()).toBe('running');
    expect(await isActive('containerd')).toBe('active');
    expect(await isActive('kubelet')).toBe('active');
  });

  it('stop-kubelet stops the kubelet unit, and its revert starts it and waits for /healthz', async () => {
    const since = realClock.now();
    const run = await startRun(runbook('sd-stop', '2m', '3s'), `sd-stop-${randomBytes(3).toString('hex')}`);
    expect(await isActive('kubelet')).toBe('inactive');
    expect(await healthz()).not.toBe('ok');
    const out = await run.ended;
    expect(out).toContain('ended passed');
    expect(await isActive('kubelet')).toBe('active');
    expect(await healthz()).toBe('ok');
    const said = await journal('kubelet', since);
    expect(said).toMatch(/Stopped kubelet/);
    expect(said).toMatch(/Started kubelet/);
  });

  it(`the dead-man's systemd-run unit starts the kubelet within faultTtl + ${DEADMAN_MARGIN_MS / 1000} s of a SIGKILLed executor`, async () => {
    const runId = `sd-dm-${randomBytes(3).toString('hex')}`;
    const run = await startRun(runbook('sd-deadman', '10s', '10m'), runId);
    const units = (await onNode(['systemctl', 'list-units', '--plain', '--no-legend', `kube-runbook-deadman-${runId}-*`])).out;
    expect(units, 'the watcher is a unit of its own').toMatch(
      new RegExp(`kube-runbook-deadman-${runId}-\\S+\\.service\\s+loaded active running`),
    );
    const watcher = /(kube-runbook-deadman-\S+\.service)/.exec(units)![1]!;
    await kill(run.child);
    const killedAt = realClock.now();
    expect(await isActive('kubelet')).toBe('inactive');
    expect(await kubeletBack(10_000 + DEADMAN_MARGIN_MS + 5_000)).toBe(true);
    const took = realClock.now() - killedAt;
    // the record: the revert's exit code (written once its script ends, after the health wait) and what it said
    const fired = { exit: await record(runId, 'exit'), log: await record(runId, 'revert.log') };
    expect(fired).toEqual({ exit: '0', log: expect.stringContaining('started kubelet') });
    // the watcher's unit ran it, and is gone (systemd-run --collect)
    expect(await journal(watcher, killedAt - 30_000)).toMatch(new RegExp(`Started ${watcher.replace(/\./g, '\\.')}`));
    expect(await eventually(async () => (await isActive(watcher)) === 'inactive', 10_000, 250)).toBe(true);
    expect(took).toBeLessThanOrEqual(10_000 + DEADMAN_MARGIN_MS);
    // the boot unit it had enabled is gone with it
    expect(await unitFilesGone(runId)).toBe(true);
    console.log(`dead-man via systemd-run: kubelet healthy ${(took / 1000).toFixed(1)} s after the SIGKILL (faultTtl 10 s)`);
  });

  it("the dead-man's boot unit starts the kubelet after a reboot, the kubelet's own unit disabled", async () => {
    const runId = `sd-boot-${randomBytes(3).toString('hex')}`;
    const run = await startRun(runbook('sd-boot', '5m', '10m'), runId);
    await kill(run.child);
    const boot = (await onNode(['sh', '-c', `ls /etc/systemd/system | grep "^kube-runbook-deadman-${runId}-.*-boot.service$"`])).out.trim();
    expect(boot).toMatch(/-boot\.service$/);
    expect((await onNode(['systemctl', 'is-enabled', boot])).out.trim()).toBe('enabled');
    // only the boot unit may bring it back: the kubelet is not started at boot by its own unit
    expect((await onNode(['systemctl', 'disable', 'kubelet'])).code).toBe(0);
    try {
      await stopSystemdNode(NAME, pid, { clock: realClock });
      pid = 0;
      const bootAt = realClock.now();
      pid = await bootSystemdNode(node, { clock: realClock });
      expect(await kubeletBack(60_000)).toBe(true);
      const took = realClock.now() - bootAt;
      // systemd ran the boot unit in this boot; its watcher fired at once (fired-at after the boot) and started the kubelet
      expect(await journal(boot, bootAt - 1000)).toMatch(/Started .*kube-runbook: after a reboot, the dead-man of/);
      const fired = { exit: await record(runId, 'exit'), log: await record(runId, 'revert.log') };
      expect(fired).toEqual({ exit: '0', log: expect.stringContaining('started kubelet') });
      expect(Number(await record(runId, 'fired-at')) * 1000).toBeGreaterThanOrEqual(bootAt - 1000);
      expect(await unitFilesGone(runId)).toBe(true);
      console.log(`dead-man's boot unit: kubelet healthy ${(took / 1000).toFixed(1)} s after the reboot began`);
    } finally {
      if (pid) await onNode(['systemctl', 'enable', 'kubelet']);
    }
  });

  it('is found by its cgroup and killed, every process of it, when nothing knows its PID any more', async () => {
    const cgroup = `/sys/fs/cgroup/pids/kube-runbook-systemd-${NAME}`;
    expect(existsSync(cgroup)).toBe(true);
    const killed = await killLeftoverSystemdNode(NAME, { clock: realClock });
    // systemd, journald, dbus, logind, sshd, containerd, the kubelet at least
    expect(killed).toBeGreaterThanOrEqual(7);
    expect(await eventually(() => !existsSync(`/proc/${pid}`), 10_000, 100)).toBe(true);
    expect(existsSync(cgroup)).toBe(false);
    pid = 0;
  });
});
