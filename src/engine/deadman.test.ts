import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { armScript, bootUnit, deadmanDir, disarmScript, keepaliveScript, leavePodCgroup, settleScript, statusScript } from './deadman.js';
import { eventually } from '../testing/wait.js';

/** A lab node's options: the boot hook in a directory under the test's root. */
const onNode = (root: string, node = 'node-1') => ({
  root,
  node,
  onBoot: 'revert' as const,
  bootHook: 'dir' as const,
  bootDir: join(root, 'boot.d'),
});

const sh = (script: string) => spawnSync('/bin/sh', ['-s'], { input: script, encoding: 'utf8' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('dead-man scripts (run for real with /bin/sh)', () => {
  let root: string;
  afterEach(() => {
    // stop any watcher left by a failing test
    spawnSync('/bin/sh', ['-c', `pkill -f ${JSON.stringify(root)} || true`]);
    rmSync(root, { recursive: true, force: true });
  });

  it('fires the revert once the keepalive is older than the ttl, and records it', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const marker = join(root, 'reverted');
    const r = sh(
      armScript({
        runId: 'run1',
        faultId: 'f01-x-node-1',
        ttlMs: 2000,
        revert: `echo done >'${marker}'`,
        allowSystemd: false,
        ...onNode(root),
      }),
    );
    expect(r.status).toBe(0);
    const dir = deadmanDir('run1', 'f01-x-node-1', root);
    expect(sh(statusScript('run1', 'f01-x-node-1', root)).stdout.trim()).toBe('armed');
    // make the keepalive look old: the watcher fires within about a second
    utimesSync(join(dir, 'keepalive'), new Date(0), new Date(0));
    expect(await eventually(() => existsSync(marker), 5000)).toBe(true);
    expect(await eventually(() => existsSync(`${dir}.fired/exit`), 3000)).toBe(true);
    expect(readFileSync(`${dir}.fired/exit`, 'utf8').trim()).toBe('0');
    expect(sh(statusScript('run1', 'f01-x-node-1', root)).stdout.trim()).toBe('fired 0');
    // an explicit revert later (recover) disarms: it says the dead-man fired and clears the record
    expect(sh(disarmScript('run1', 'f01-x-node-1', root)).stdout.trim()).toBe('fired 0');
    expect(sh(statusScript('run1', 'f01-x-node-1', root)).stdout.trim()).toBe('absent');
  });

  it('does not fire while kept alive, and a disarm stops the watcher', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const marker = join(root, 'reverted');
    sh(armScript({ runId: 'run2', faultId: 'f01-y', ttlMs: 2000, revert: `touch '${marker}'`, allowSystemd: false, ...onNode(root) }));
    const dir = deadmanDir('run2', 'f01-y', root);
    const pid = Number(readFileSync(join(dir, 'watcher.pid'), 'utf8'));
    for (let i = 0; i < 20; i++) {
      expect(sh(keepaliveScript('run2', root)).status).toBe(0);
      await sleep(200);
    }
    expect(existsSync(marker)).toBe(false);
    expect(sh(disarmScript('run2', 'f01-y', root)).status).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(await eventually(() => spawnSync('kill', ['-0', String(pid)]).status !== 0, 3000)).toBe(true);
    expect(existsSync(marker)).toBe(false);
    expect(sh(disarmScript('run2', 'f01-y', root)).status).toBe(0); // idempotent
  });

  it('carries a hostile revert script verbatim and runs nothing else', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const pwned = join(root, 'pwned');
    const hostile = `printf '%s\\n' "it's \\$(touch ${pwned})" 'KR_0000' '\`touch ${pwned}\`' > '${root}/out'`;
    sh(armScript({ runId: 'run3', faultId: 'f01-z', ttlMs: 60_000, revert: hostile, allowSystemd: false, ...onNode(root) }));
    const dir = deadmanDir('run3', 'f01-z', root);
    expect(readFileSync(join(dir, 'revert.sh'), 'utf8')).toBe(`${hostile}\n`);
    expect(existsSync(pwned)).toBe(false);
    execFileSync('/bin/sh', [join(dir, 'revert.sh')]);
    expect(existsSync(pwned)).toBe(false);
    sh(disarmScript('run3', 'f01-z', root));
  });

  it('refuses ids that could escape the directory', () => {
    expect(() => deadmanDir('../etc', 'f1')).toThrow(/invalid run id/);
    expect(() => deadmanDir('run', 'a b')).toThrow(/invalid fault id/);
    expect(() => deadmanDir('run', '$(x)')).toThrow(/invalid fault id/);
  });
});

describe('arming is confirmed', () => {
  it('fails, leaving nothing armed, when the watcher does not start', () => {
    const root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    try {
      // a setsid that exits at once instead of starting the watcher
      mkdirSync(join(root, 'bin'));
      writeFileSync(join(root, 'bin', 'setsid'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
      const script = armScript({ runId: 'run9', faultId: 'f01-q', ttlMs: 60_000, revert: 'true', allowSystemd: false, ...onNode(root) });
      const r = spawnSync('/bin/sh', ['-s'], {
        input: script,
        encoding: 'utf8',
        env: { PATH: `${join(root, 'bin')}:${process.env.PATH}` },
        timeout: 20_000,
      });
      expect(r.stderr).toContain("the dead-man's watcher did not start");
      expect(r.status).toBe(1);
      expect(existsSync(deadmanDir('run9', 'f01-q', root))).toBe(false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('completes with its caller gone: an executor killed mid-arm leaves a watcher that fires, not a dead-man none keeps', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    try {
      const marker = join(root, 'reverted');
      const script = armScript({
        runId: 'run8',
        faultId: 'f01-k',
        ttlMs: 2000,
        revert: `touch '${marker}'`,
        allowSystemd: false,
        ...onNode(root),
      });
      // the caller's ends of stdout and stderr closed before the script runs: what a SIGKILLed executor leaves
      const c = spawn('/bin/sh', ['-s'], { stdio: ['pipe', 'pipe', 'pipe'] });
      c.stdout.destroy();
      c.stderr.destroy();
      const ended = new Promise((resolve) => c.on('close', resolve));
      c.stdin.end(script);
      await ended;
      const dir = deadmanDir('run8', 'f01-k', root);
      expect(existsSync(join(dir, 'watcher'))).toBe(true);
      utimesSync(join(dir, 'keepalive'), new Date(0), new Date(0));
      expect(await eventually(() => existsSync(marker), 5000)).toBe(true);
      expect(await eventually(() => existsSync(`${dir}.fired/exit`), 3000)).toBe(true);
    } finally {
      spawnSync('/bin/sh', ['-c', `pkill -f ${JSON.stringify(root)} || true`]);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("a disarm kills only the process running this fault's watcher, not whatever has its recorded pid now", async () => {
    const root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      expect(
        sh(armScript({ runId: 'run8', faultId: 'f01-p', ttlMs: 60_000, revert: 'true', allowSystemd: false, ...onNode(root) })).status,
      ).toBe(0);
      const dir = deadmanDir('run8', 'f01-p', root);
      const watcher = Number(readFileSync(join(dir, 'watcher.pid'), 'utf8'));
      // as after a reboot: the recorded pid now belongs to another process
      writeFileSync(join(dir, 'watcher.pid'), String(other.pid));
      expect(sh(disarmScript('run8', 'f01-p', root)).status).toBe(0);
      expect(other.exitCode).toBeNull();
      expect(spawnSync('kill', ['-0', String(other.pid)]).status).toBe(0);
      // the watcher itself sees its directory gone and exits
      expect(await eventually(() => spawnSync('kill', ['-0', String(watcher)]).status !== 0, 3000)).toBe(true);
    } finally {
      other.kill('SIGKILL');
      rmSync(root, { recursive: true, force: true });
    }
  });
});

/** Stops a dead-man's watcher as a reboot would: the process is gone, its files stay. */
function killWatcher(dir: string): void {
  spawnSync('/bin/sh', ['-c', `pkill -KILL -f ${JSON.stringify(`${dir}/watch.sh`)} || true`]);
}

describe('after a reboot (the watcher gone, the boot step run)', () => {
  let root: string;
  afterEach(() => {
    spawnSync('/bin/sh', ['-c', `pkill -f ${JSON.stringify(root)} || true`]);
    rmSync(root, { recursive: true, force: true });
  });

  it('a fault is reverted at once by its boot hook, which then removes itself', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const marker = join(root, 'parked');
    writeFileSync(marker, '');
    const r = sh(
      armScript({
        runId: 'rb1',
        faultId: 'f01-stop-x-node-2',
        ttlMs: 600_000,
        revert: `rm -f '${marker}'`,
        allowSystemd: false,
        ...onNode(root, 'node-2'),
      }),
    );
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('boot-hook dir');
    const dir = deadmanDir('rb1', 'f01-stop-x-node-2', root);
    const hook = join(root, 'boot.d', 'node-2', 'rb1--f01-stop-x-node-2');
    expect(existsSync(hook)).toBe(true);
    killWatcher(dir);
    // what the node runs at boot
    expect(spawnSync('/bin/sh', [hook], { encoding: 'utf8', timeout: 20_000 }).status).toBe(0);
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(`${dir}.fired/exit`, 'utf8').trim()).toBe('0');
    expect(existsSync(hook)).toBe(false);
    expect(sh(disarmScript('rb1', 'f01-stop-x-node-2', root)).stdout.trim()).toBe('fired 0');
  });

  it('a remediation is not undone by a reboot: its watcher starts again and waits for its ttl', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const marker = join(root, 'undone');
    sh(
      armScript({
        runId: 'rb2',
        faultId: 'f01-freeze',
        ttlMs: 3000,
        revert: `touch '${marker}'`,
        allowSystemd: false,
        ...onNode(root),
        onBoot: 'rewatch',
      }),
    );
    const dir = deadmanDir('rb2', 'f01-freeze', root);
    const hook = join(root, 'boot.d', 'node-1', 'rb2--f01-freeze');
    killWatcher(dir);
    const boot = spawn('/bin/sh', [hook], { stdio: 'ignore' });
    await sleep(1500);
    expect(existsSync(marker)).toBe(false);
    expect(sh(statusScript('rb2', 'f01-freeze', root)).stdout.trim()).toBe('armed');
    // without keepalive it fires once the ttl has passed, and only then
    expect(await eventually(() => existsSync(marker), 6000)).toBe(true);
    boot.kill();
  });

  it('a disarm removes the boot hook with the dead-man', () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    sh(armScript({ runId: 'rb3', faultId: 'f01-a', ttlMs: 60_000, revert: 'true', allowSystemd: false, ...onNode(root) }));
    expect(existsSync(join(root, 'boot.d', 'node-1', 'rb3--f01-a'))).toBe(true);
    expect(sh(disarmScript('rb3', 'f01-a', root)).status).toBe(0);
    expect(existsSync(join(root, 'boot.d', 'node-1'))).toBe(false);
    expect(existsSync(join(root, 'rb3'))).toBe(false);
  });

  it('the systemd unit runs boot.sh of that dead-man only while its directory exists', () => {
    const unit = bootUnit('rb4', 'f02-stop-kubelet-n1', '/var/lib/kube-runbook/deadman/rb4/f02-stop-kubelet-n1');
    expect(unit).toContain('ConditionPathIsDirectory=/var/lib/kube-runbook/deadman/rb4/f02-stop-kubelet-n1\n');
    expect(unit).toContain('ExecStart=/bin/sh /var/lib/kube-runbook/deadman/rb4/f02-stop-kubelet-n1/boot.sh\n');
    expect(unit).toContain('WantedBy=multi-user.target');
  });
});

describe("the executor's revert and the dead-man never run at once", () => {
  let root: string;
  afterEach(() => {
    spawnSync('/bin/sh', ['-c', `pkill -f ${JSON.stringify(root)} || true`]);
    rmSync(root, { recursive: true, force: true });
  });

  it('settle keeps an armed dead-man from firing: it touches the keepalive', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const marker = join(root, 'fired');
    sh(armScript({ runId: 'rc1', faultId: 'f01-a', ttlMs: 5000, revert: `touch '${marker}'`, allowSystemd: false, ...onNode(root) }));
    const dir = deadmanDir('rc1', 'f01-a', root);
    // 3 s old of a 5 s ttl: the watcher would fire in 2 s without the touch
    const old = new Date(statSync(join(dir, 'keepalive')).mtimeMs - 3000);
    utimesSync(join(dir, 'keepalive'), old, old);
    expect(sh(settleScript('rc1', 'f01-a', 10, root)).stdout.trim()).toBe('armed');
    await sleep(3500);
    expect(existsSync(marker)).toBe(false);
    sh(disarmScript('rc1', 'f01-a', root));
  });

  it('settle waits for a dead-man that fired to finish its revert', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const done = join(root, 'done');
    sh(
      // a ttl that does not run out by itself (a loaded machine once let a 1 s one fire before the keepalive was aged)
      armScript({
        runId: 'rc2',
        faultId: 'f01-a',
        ttlMs: 30_000,
        revert: `sleep 2; touch '${done}'`,
        allowSystemd: false,
        ...onNode(root),
      }),
    );
    const dir = deadmanDir('rc2', 'f01-a', root);
    utimesSync(join(dir, 'keepalive'), new Date(0), new Date(0));
    expect(await eventually(() => existsSync(`${dir}.fired`), 3000)).toBe(true);
    const r = sh(settleScript('rc2', 'f01-a', 20, root));
    expect(r.stdout.trim()).toBe('fired 0');
    expect(existsSync(done)).toBe(true);
  });

  it("a node's dead-men revert independently: one waiting on what another reverts does not hold it back", async () => {
    // cp-1 holds a scheduler stop and an etcd disk throttle: the scheduler's revert waits for a health the throttle
    // keeps away; the throttle's revert must not wait for it
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const unthrottled = join(root, 'unthrottled');
    const healthy = join(root, 'healthy');
    const start = `i=0; while [ ! -f '${unthrottled}' ] && [ "$i" -lt 150 ]; do sleep 0.1; i=$((i + 1)); done; touch '${healthy}'`;
    const arm = (faultId: string, revert: string) =>
      // a ttl that does not run out by itself here: each fires when the test makes its keepalive old
      sh(armScript({ runId: 'rc3', faultId, ttlMs: 60_000, revert, allowSystemd: false, ...onNode(root, 'cp-1') }));
    arm('f01-stop-scheduler-cp-1', start);
    arm('f02-throttle-etcd-disk-cp-1', `touch '${unthrottled}'`);
    const fire = (id: string) => utimesSync(join(deadmanDir('rc3', id, root), 'keepalive'), new Date(0), new Date(0));
    // the scheduler's dead-man fires first and is waiting; then the throttle's
    fire('f01-stop-scheduler-cp-1');
    expect(await eventually(() => existsSync(`${deadmanDir('rc3', 'f01-stop-scheduler-cp-1', root)}.fired`), 5000)).toBe(true);
    fire('f02-throttle-etcd-disk-cp-1');
    // within the 15 s the scheduler's revert would wait: the throttle reverted, then the scheduler healthy
    expect(await eventually(() => existsSync(healthy), 6000), 'both reverted before the waiting one gave up').toBe(true);
    const fired = `${deadmanDir('rc3', 'f02-throttle-etcd-disk-cp-1', root)}.fired`;
    expect(readFileSync(join(fired, 'exit'), 'utf8').trim()).toBe('0');
    expect(Number(readFileSync(join(fired, 'fired-at'), 'utf8'))).toBeGreaterThan(0);
  });

  it('a revert that hangs is killed at its limit, with the processes it started, and recorded as exit 124', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-deadman-'));
    const pidFile = join(root, 'child.pid');
    sh(
      armScript({
        runId: 'rc4',
        faultId: 'f01-hang',
        ttlMs: 1000,
        revertLimitMs: 1000,
        revert: `sleep 300 & echo $! >'${pidFile}'; wait`,
        allowSystemd: false,
        ...onNode(root),
      }),
    );
    const dir = deadmanDir('rc4', 'f01-hang', root);
    utimesSync(join(dir, 'keepalive'), new Date(0), new Date(0));
    expect(await eventually(() => existsSync(`${dir}.fired/exit`), 10_000)).toBe(true);
    expect(readFileSync(`${dir}.fired/exit`, 'utf8').trim()).toBe('124');
    const child = readFileSync(pidFile, 'utf8').trim();
    expect(await eventually(() => !existsSync(`/proc/${child}`), 3000), `the revert's child ${child} still runs`).toBe(true);
  });
});

describe("a watcher started in a pod's container", () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** A /proc with process 4242's cgroups and cgroup hierarchies holding `dirs`, each with an empty cgroup.procs. */
  function fake(cgroups: string, dirs: string[]) {
    root = mkdtempSync(join(tmpdir(), 'kr-cgroup-'));
    mkdirSync(join(root, 'proc', '4242'), { recursive: true });
    writeFileSync(join(root, 'proc', '4242', 'cgroup'), cgroups);
    for (const d of dirs) {
      mkdirSync(join(root, 'cg', d), { recursive: true });
      writeFileSync(join(root, 'cg', d, 'cgroup.procs'), '');
    }
    return { proc: join(root, 'proc'), cgroupFs: join(root, 'cg') };
  }
  const procs = (d: string) => readFileSync(join(root, 'cg', d, 'cgroup.procs'), 'utf8');

  it('leaves the pod for the cgroup above kubepods in every hierarchy (cgroup v1, a named hierarchy)', () => {
    const o = fake(
      '12:cpu,cpuacct:/kube-runbook-x-rnode-1/kubepods/burstable/pod1/c1\n1:name=systemd:/kube-runbook-x-rnode-1/kubepods/burstable/pod1/c1\n0::/\n',
      ['cpu,cpuacct/kube-runbook-x-rnode-1', 'systemd/kube-runbook-x-rnode-1', 'cpu,cpuacct/kube-runbook-x-rnode-1/kubepods'],
    );
    expect(sh(leavePodCgroup('4242', o)).status).toBe(0);
    expect(procs('cpu,cpuacct/kube-runbook-x-rnode-1')).toBe('4242\n');
    expect(procs('systemd/kube-runbook-x-rnode-1')).toBe('4242\n');
    expect(procs('cpu,cpuacct/kube-runbook-x-rnode-1/kubepods')).toBe('');
  });

  it('goes to the root cgroup of a node whose pods are under /kubepods.slice (cgroup v2)', () => {
    const o = fake('0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-c1.scope\n', ['']);
    expect(sh(leavePodCgroup('4242', o)).status).toBe(0);
    expect(procs('')).toBe('4242\n');
  });

  it('stays where it is when not in a pod, and when its process is gone', () => {
    const o = fake('4:memory:/user.slice\n0::/system.slice/cron.service\n', ['memory', '']);
    expect(sh(leavePodCgroup('4242', o)).status).toBe(0);
    expect(sh(leavePodCgroup('4343', o)).status).toBe(0);
    expect(procs('memory') + procs('')).toBe('');
  });
});
