import { spawn } from 'node:child_process';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../host/host.js';
import { serviceScripts, writeService, type ServiceSpec } from './services.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

const spec = (dir: string): ServiceSpec => ({
  instance: 't1',
  node: 'node-1',
  service: 'kubelet',
  dir,
  netns: 'kr-t1-node-1',
  command: ['/bin/sleep', '300', `--marker=${dir}`],
  env: { ODD: "it's $HOME" },
  joins: [{ dir: `/sys/fs/cgroup/blkio/kube-runbook-t1-etcd`, version: 1, name: 'kube-runbook-t1-etcd', options: 'blkio' }],
  health: 'exit 0',
  stopTimeoutSec: 2,
});

describe('lab service scripts', () => {
  let dir: string;
  // a state directory with a space and a quote must survive the shell
  tempDirEach("kr svc 'x' ", (d) => (dir = d));

  it('writes five executable POSIX sh scripts that parse', async () => {
    await writeService(spec(dir));
    for (const name of ['run', 'start', 'stop', 'status', 'health']) {
      const file = join(dir, name);
      expect((await stat(file)).mode & 0o111).toBe(0o111);
      const r = await run('/bin/sh', ['-n', file]);
      expect(r.code, `${name}: ${r.stderr}`).toBe(0);
    }
  });

  it('run enters the namespace, joins the cgroup and execs the command with every word quoted', () => {
    const text = serviceScripts(spec(dir)).run;
    expect(text).toContain(`exec ip netns exec kr-t1-node-1 '${dir.replace(/'/g, `'\\''`)}'/run`);
    expect(text).toContain("export ODD='it'\\''s $HOME'");
    expect(text).toContain('/sys/fs/cgroup/blkio/kube-runbook-t1-etcd/cgroup.procs');
    expect(text).toMatch(/set -- \/bin\/sleep \\\n {4}300/);
    expect(text).toContain('exec "$@"');
  });

  it("a real node's run enters only the network namespace and joins each hierarchy's system/ cgroup first", () => {
    const real = {
      ...spec(dir),
      joins: undefined,
      netOnly: true,
      cgroups: ['/sys/fs/cgroup/cpu/kube-runbook-t1-rnode-1/system', '/sys/fs/cgroup/memory/kube-runbook-t1-rnode-1/system'],
    };
    const text = serviceScripts(real).run;
    expect(text).toContain(`exec nsenter --net=/run/netns/kr-t1-node-1 -- '${dir.replace(/'/g, `'\\''`)}'/run`);
    expect(text).not.toContain('ip netns exec');
    const joins = ['cpu', 'memory'].map((h) => text.indexOf(`echo $$ > /sys/fs/cgroup/${h}/kube-runbook-t1-rnode-1/system/cgroup.procs`));
    expect(joins.every((i) => i > 0 && i < text.indexOf('nsenter'))).toBe(true);
  });

  it("a kubeadm node's run enters its mount namespace by the file from the host, else by a running service of the node, then joins its cgroups", () => {
    const text = serviceScripts({
      ...spec(dir),
      joins: undefined,
      netOnly: true,
      mountNs: '/run/kube-runbook/t1/mnt/rnode-1',
      cgroups: ['/sys/fs/cgroup/memory/kube-runbook-t1-rnode-1/kubelet'],
    }).run;
    const d = dir.replace(/'/g, `'\\''`);
    expect(text).toContain(
      `if [ "$(stat -f -c %T /run/kube-runbook/t1/mnt/rnode-1 2>/dev/null)" = nsfs ]; then KR_NODE_ENTERED=1 exec nsenter --net=/run/netns/kr-t1-node-1 --mount=/run/kube-runbook/t1/mnt/rnode-1 -- '${d}'/run "$@"; fi`,
    );
    // from `ip netns exec` (a revert, a dead-man): through the mount namespace of another service of the node that runs
    expect(text).toContain(`for f in '${d}'/../*/pid; do`);
    expect(text).toContain(`KR_NODE_ENTERED=1 exec nsenter --net=/run/netns/kr-t1-node-1 --mount="$kr_via" -- '${d}'/run "$@"`);
    const join = text.indexOf('echo $$ > /sys/fs/cgroup/memory/kube-runbook-t1-rnode-1/kubelet/cgroup.procs');
    expect(join).toBeGreaterThan(text.indexOf('unset KR_NODE_ENTERED'));
  });

  it('run appends one argument per line of extra-args, read at each start and never split or globbed', async () => {
    const text = serviceScripts({ ...spec(dir), command: ['/usr/bin/printf', '[%s]', 'a b'] }).run;
    const fn = text.slice(text.indexOf('kr_exec() {'), text.indexOf('\n}\n', text.indexOf('kr_exec() {')) + 3);
    const once = async () => (await run('/bin/sh', ['-c', `${fn}kr_exec`])).stdout;
    expect(await once()).toBe('[a b]');
    await writeFile(join(dir, 'extra-args'), '--controllers=*,-taint-eviction-controller\nc d\n$HOME');
    expect(await once()).toBe('[a b][--controllers=*,-taint-eviction-controller][c d][$HOME]');
    await rm(join(dir, 'extra-args'));
    expect(await once()).toBe('[a b]');
  });

  it('status says 0 while the process named in pid runs, 3 when stopped; stop is TERM then done, and idempotent', async () => {
    await writeService(spec(dir));
    const status = async () => (await run(join(dir, 'status'), [])).code;
    expect(await status()).toBe(3);
    const child = spawn('/bin/sleep', ['300'], { stdio: 'ignore' });
    // a process whose command line does not name the service directory is not the service
    await writeFile(join(dir, 'pid'), String(child.pid));
    expect(await status()).toBe(3);
    // nor is a running process whose command line stays empty (a kernel thread: kthreadd)
    await writeFile(join(dir, 'pid'), '2');
    expect(await status()).toBe(3);
    child.kill('SIGKILL');
    const svc = spawn('/bin/sh', ['-c', 'sleep 300 & wait', join(dir, 'marker')], { stdio: 'ignore', detached: true });
    await writeFile(join(dir, 'pid'), String(svc.pid));
    expect(await status()).toBe(0);
    const exited = new Promise<string | null>((r) => svc.on('exit', (_c, sig) => r(sig)));
    expect((await run(join(dir, 'stop'), [])).code).toBe(0);
    expect(await exited).toBe('SIGTERM');
    expect(await status()).toBe(3);
    expect(await readFile(join(dir, 'pid'), 'utf8').catch(() => 'gone')).toBe('gone');
    expect((await run(join(dir, 'stop'), [])).code).toBe(0);
    process.kill(-svc.pid!, 'SIGKILL');
  });

  it('status waits out a command line left empty for a while, as one is while a loaded machine execs the component', async () => {
    await writeService(spec(dir));
    // empty for 400 ms, then naming the service directory (perl rewrites its own argv)
    const svc = spawn('perl', ['-e', `$0 = ""; select(undef, undef, undef, 0.4); $0 = "svc ${dir}/marker"; sleep 30`], { stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(await readFile(`/proc/${svc.pid}/cmdline`, 'latin1'), 'the command line is empty now').toBe('\0');
      await writeFile(join(dir, 'pid'), String(svc.pid));
      expect((await run(join(dir, 'status'), [])).code).toBe(0);
    } finally {
      svc.kill('SIGKILL');
    }
  });

  it('start and run replace pid by rename, so status never reads it empty while the component starts', async () => {
    for (const text of Object.values(serviceScripts(spec(dir)))) expect(text).not.toMatch(/> [^\n&]*\/pid\n/);
    // no namespace and no cgroup: `run` runs here as it is
    const plain: ServiceSpec = {
      ...spec(dir),
      netns: '',
      joins: undefined,
      command: ['/bin/sh', '-c', 'while :; do sleep 0.1; done', join(dir, 'marker')],
    };
    await writeService(plain);
    expect((await run(join(dir, 'start'), [])).code).toBe(0);
    const codes: number[] = [];
    for (let i = 0; i < 20; i++) codes.push((await run(join(dir, 'status'), [])).code);
    expect(codes, await readFile(join(dir, 'log'), 'utf8')).toEqual(codes.map(() => 0));
    const pid = Number(await readFile(join(dir, 'pid'), 'utf8'));
    expect((await run(join(dir, 'stop'), [])).code).toBe(0);
    expect((await run(join(dir, 'status'), [])).code).toBe(3);
    expect(
      await readFile(`/proc/${pid}/status`, 'utf8')
        .then((t) => /^State:\s*Z/m.test(t))
        .catch(() => true),
    ).toBe(true);
    expect((await readdir(dir)).filter((f) => f.startsWith('pid'))).toEqual([]);
  });

  it("in the host's namespace, stop of a killGroup service ends the children it forked too (a forwarder's connections)", async () => {
    const forking: ServiceSpec = {
      ...spec(dir),
      netns: undefined,
      joins: undefined,
      killGroup: true,
      // a parent that ignores TERM and leaves a child per "connection"
      command: ['/bin/sh', '-c', `trap '' TERM; sleep 301 & echo $! > "$1"/child; wait`, 'sh', dir],
    };
    const text = serviceScripts(forking).run;
    expect(text).not.toContain('ip netns');
    await writeService(forking);
    expect((await run(join(dir, 'start'), [])).code).toBe(0);
    let child = '';
    for (let i = 0; i < 50 && !child; i++) {
      child = (await readFile(join(dir, 'child'), 'utf8').catch(() => '')).trim();
      if (!child) await new Promise((r) => setTimeout(r, 50));
    }
    expect(child).toMatch(/^\d+$/);
    const alive = (pid: string) =>
      readFile(`/proc/${pid}/status`, 'utf8')
        .then((t) => !/^State:\s*Z/m.test(t))
        .catch(() => false);
    expect(await alive(child)).toBe(true);
    expect((await run(join(dir, 'stop'), [])).code).toBe(0);
    expect((await run(join(dir, 'status'), [])).code).toBe(3);
    expect(await alive(child)).toBe(false);
  });

  it('health fails when the process does not run, whatever the check says', async () => {
    await writeService(spec(dir));
    expect((await run(join(dir, 'health'), [])).code).toBe(1);
  });
});
