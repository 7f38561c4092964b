import { NOT_YET_EXIT } from './script.js';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Inventory } from '../../inventory/schema.js';
import { serviceManager, serviceTarget } from './index.js';
import type { ProcessTarget, StaticPodTarget, SystemdTarget } from './types.js';
import { inventoryOf } from '../../testing/inventories.js';

/**
 * The managers' scripts run for real with dash, against a temp directory standing in for the node: the tools
 * they call (systemctl, pgrep, crictl, curl) are stubs that act on files there, so stopping and starting has an
 * effect the tests can see.
 */
let dir: string;
let bin: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kr-services-'));
  bin = join(dir, 'bin');
  mkdirSync(bin);
  stub('id', 'echo 0');
  stub('sleep', ':');
  stub('curl', 'echo "$*" >>"$KR_NODE/curl.log"; printf 200');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function stub(name: string, body: string) {
  writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
  chmodSync(join(bin, name), 0o755);
}

function runScript(script: string, env: Record<string, string> = {}) {
  const r = spawnSync('/bin/sh', ['-s'], {
    input: script,
    encoding: 'utf8',
    env: { PATH: `${bin}:/usr/bin:/bin`, KR_NODE: dir, ...env },
    timeout: 10_000,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/**
 * A process in the stand-in /proc (KR_PROC_ROOT) the static-pod scripts read: its network namespace and cgroup.
 * `self` is the shell that asks.
 */
function fakeProc(pid: string, o: { net?: string; cgroup?: string } = {}) {
  const at = join(dir, 'proc', pid);
  mkdirSync(join(at, 'ns'), { recursive: true });
  symlinkSync(o.net ?? 'net:[4026531840]', join(at, 'ns', 'net'));
  writeFileSync(
    join(at, 'cgroup'),
    `0::${o.cgroup ?? '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-1.scope'}\n`,
  );
}

const run = (script: string) => runScript(script);

describe('static-pod manager', () => {
  let t: StaticPodTarget;
  const run = (script: string) => runScript(script, { KR_PROC_ROOT: join(dir, 'proc') });
  beforeEach(() => {
    fakeProc('self');
    // the component's container: in a kubepods cgroup, in this node's network namespace
    fakeProc('4321');
    mkdirSync(join(dir, 'manifests'));
    t = {
      manager: 'static-pod',
      service: 'kube-apiserver',
      manifest: join(dir, 'manifests', 'kube-apiserver.yaml'),
      parked: join(dir, 'kube-runbook-parked', 'kube-apiserver.yaml'),
      process: 'kube-apiserver',
      health: { scheme: 'https', port: 6443, path: '/readyz', portFlag: '--secure-port' },
    };
    writeFileSync(t.manifest, 'spec:\n  containers:\n  - command:\n    - kube-apiserver\n    - --secure-port=7443\n');
    // the kubelet: the component runs exactly while its manifest is in the manifests directory (a pid in this
    // network namespace: the shell that asks)
    stub('pgrep', `[ -f ${JSON.stringify(t.manifest)} ] && echo 4321`);
  });

  it('stop parks the manifest outside the manifests directory and waits until the process is gone; idempotent', () => {
    const m = serviceManager(t);
    expect(run(m.preflight(t)).code).toBe(0);
    expect(run(m.status(t)).code).toBe(0);
    stub('pgrep', 'exit 1'); // crash-looping: no process right now, but the kubelet will start it again
    expect(run(m.status(t)).code, 'a manifest in place counts as running').toBe(0);
    stub('pgrep', `[ -f ${JSON.stringify(t.manifest)} ] && echo 4321`);
    expect(run(m.stop(t, 5))).toMatchObject({ code: 0 });
    expect(existsSync(t.manifest)).toBe(false);
    expect(readFileSync(t.parked, 'utf8')).toContain('--secure-port=7443');
    expect(run(m.status(t)).code).toBe(3);
    expect(run(m.stop(t, 5)).code).toBe(0);
    expect(run(m.preflight(t)).out).toMatch(/parked in .* by an earlier run: run kube-runbook recover/);
  });

  it('start puts the manifest back and checks health on the port the manifest sets; idempotent', () => {
    const m = serviceManager(t);
    run(m.stop(t, 5));
    expect(run(m.start(t, 5))).toMatchObject({ code: 0 });
    expect(existsSync(t.manifest)).toBe(true);
    expect(existsSync(t.parked)).toBe(false);
    expect(readFileSync(join(dir, 'curl.log'), 'utf8')).toContain('https://127.0.0.1:7443/readyz');
    expect(run(m.start(t, 5)).code).toBe(0);
  });

  it('start that loses the race to move the manifest back (a dead-man moved it first) still succeeds', () => {
    const m = serviceManager(t);
    run(m.stop(t, 5));
    // the other revert wins between this one's check and its mv: the manifest is back, this mv fails
    stub('mv', '/bin/mv "$@"; echo "mv: cannot stat" >&2; exit 1');
    expect(run(m.start(t, 5))).toMatchObject({ code: 0 });
    expect(existsSync(t.manifest)).toBe(true);
  });

  it('stop fails, saying so, when the process outlives its manifest', () => {
    stub('pgrep', 'echo 4321');
    const r = run(serviceManager(t).stop(t, 2));
    // a wait that has not succeeded yet: its own exit code, which runOnNode calls transient
    expect(r.code).toBe(NOT_YET_EXIT);
    expect(r.out).toContain('kube-apiserver still running 2 s after its manifest was parked');
  });

  it("stop does not wait for a process of another network namespace (another node's on the same kernel)", () => {
    // a pid whose network namespace is not this shell's (here it has none: gone) does not count
    stub('pgrep', 'echo 999999999');
    expect(run(serviceManager(t).stop(t, 2))).toMatchObject({ code: 0 });
  });

  it("pid is the container's process, never a process that only looks like the component", () => {
    const m = serviceManager(t);
    // a user's /tmp/kube-apiserver (newer: pgrep lists it last) in a session's cgroup, and an exec'd look-alike
    // in another node's network namespace: only the kubepods process of this node is the component
    fakeProc('5000', { cgroup: '/user.slice/user-1000.slice/session-3.scope' });
    fakeProc('5001', { net: 'net:[4026532000]' });
    stub('pgrep', 'echo 4321; echo 5000; echo 5001');
    expect(run(m.pid(t))).toMatchObject({ code: 0, out: '4321\n' });
    // without the real one, the look-alikes are no process of the component
    stub('pgrep', 'echo 5000; echo 5001');
    expect(run(m.pid(t)).code).toBe(3);
    expect(run(m.stop(t, 2))).toMatchObject({ code: 0 });
  });

  it('pid, with crictl: the main process of the running container of that name in a kube-system pod', () => {
    stub(
      'crictl',
      `echo "$*" >>"$KR_NODE/crictl.log"
case "$1" in
  ps) echo 0123abcd ;;
  inspect) printf '{\n  "info": {\n    "sandboxID": "x",\n    "pid": 2718,\n    "runtimeSpec": {"linux": {"namespaces": [{"type": "pid"}]}}\n  }\n}\n' ;;
esac`,
    );
    stub('pgrep', 'echo 4321');
    expect(run(serviceManager(t).pid(t))).toMatchObject({ code: 0, out: '2718\n' });
    expect(readFileSync(join(dir, 'crictl.log'), 'utf8')).toBe(
      'ps -q --state running --name ^kube-apiserver$ --label io.kubernetes.pod.namespace=kube-system\ninspect 0123abcd\n',
    );
  });

  it('start fails when there is no manifest anywhere', () => {
    rmSync(t.manifest);
    expect(run(serviceManager(t).start(t, 2)).out).toMatch(/no manifest .* to start kube-apiserver from/);
  });
});

describe('systemd manager', () => {
  const t: SystemdTarget = { manager: 'systemd', service: 'kubelet', unit: 'kubelet', healthUrl: 'http://127.0.0.1:10248/healthz' };
  beforeEach(() => {
    writeFileSync(join(dir, 'active'), 'active');
    stub(
      'systemctl',
      `case "$1" in
  cat) [ "$2" = kubelet ] ;;
  is-active)
    s=$(cat "$KR_NODE/active" 2>/dev/null || echo inactive)
    [ "$2" = --quiet ] || echo "$s"
    [ "$s" = active ] ;;
  stop) rm -f "$KR_NODE/active" ;;
  start) echo active >"$KR_NODE/active" ;;
  show) [ -f "$KR_NODE/active" ] && echo MainPID=4321 || echo MainPID=0 ;;
esac`,
    );
  });

  it('stops, reports the pid and status, starts again and waits for healthz', () => {
    const m = serviceManager(t);
    expect(run(m.preflight(t)).code).toBe(0);
    expect(run(m.pid(t)).out.trim()).toBe('4321');
    expect(run(m.stop(t, 3)).code).toBe(0);
    expect(run(m.status(t))).toMatchObject({ code: 3, out: 'stopped\n' });
    expect(run(m.pid(t)).code).toBe(3);
    expect(run(m.start(t, 3)).code).toBe(0);
    expect(readFileSync(join(dir, 'curl.log'), 'utf8')).toContain('http://127.0.0.1:10248/healthz');
    expect(run(m.status(t)).code).toBe(0);
  });

  it('a unit restarting after a crash counts as running, so the revert starts it again', () => {
    writeFileSync(join(dir, 'active'), 'activating');
    expect(run(serviceManager(t).status(t))).toMatchObject({ code: 0, out: 'running\n' });
    writeFileSync(join(dir, 'active'), 'failed');
    expect(run(serviceManager(t).status(t)).code).toBe(3);
  });

  it('preflight refuses a missing unit and a user that is not root', () => {
    const m = serviceManager(t);
    expect(run(m.preflight({ ...t, unit: 'k3s-agent' })).out).toContain('systemd unit k3s-agent not found');
    stub('id', 'echo 1000');
    expect(run(m.preflight(t)).out).toContain('needs root');
  });
});

/** A lab service directory, made: `lab(name, body)` writes its executable script `name` (`$d` is the directory). */
function labScripts(dir: string) {
  mkdirSync(dir, { recursive: true });
  return (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/sh\nd=$(dirname "$0")\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
}

describe('process manager (the lab)', () => {
  it("drives the lab's own scripts and waits for health", () => {
    const t: ProcessTarget = { manager: 'process', service: 'kubelet', dir: join(dir, 'nodes', 'node 1', 'kubelet') };
    const lab = labScripts(t.dir);
    lab('start', 'echo 777 >"$d/pid"; touch "$d/up"');
    lab('stop', 'rm -f "$d/up" "$d/pid"');
    lab('status', '[ -f "$d/up" ] || exit 3');
    lab('health', '[ -f "$d/up" ]');
    const m = serviceManager(t);
    expect(run(m.preflight(t)).code).toBe(0);
    expect(run(m.status(t)).code).toBe(3);
    expect(run(m.start(t, 3)).code).toBe(0);
    expect(run(m.pid(t)).out.trim()).toBe('777');
    expect(run(m.stop(t, 3)).code).toBe(0);
    expect(run(m.status(t))).toMatchObject({ code: 3, out: 'stopped\n' });
    rmSync(join(t.dir, 'health'));
    expect(run(m.preflight(t)).out).toContain('has no executable health script');
  });
});

describe('process manager: a start that meets a process still exiting', () => {
  it('starts it again once it is gone, instead of waiting for a process that will not come back', () => {
    const t: ProcessTarget = { manager: 'process', service: 'etcd', dir: join(dir, 'nodes', 'cp-1', 'etcd') };
    const lab = labScripts(t.dir);
    // the old process exits a few status checks after start looked (it said running, so start did nothing)
    writeFileSync(join(t.dir, 'exiting'), '3');
    lab('start', '[ -f "$d/exiting" ] && exit 0; touch "$d/up"; echo start >>"$d/starts"');
    lab(
      'status',
      'if [ -f "$d/exiting" ]; then n=$(cat "$d/exiting"); if [ "$n" -le 0 ]; then rm -f "$d/exiting"; exit 3; fi; echo $((n - 1)) >"$d/exiting"; exit 0; fi; [ -f "$d/up" ] || exit 3',
    );
    lab('health', '[ -f "$d/up" ]');
    lab('stop', 'rm -f "$d/up"');
    const r = run(serviceManager(t).start(t, 10));
    expect(r).toMatchObject({ code: 0 });
    expect(readFileSync(join(t.dir, 'starts'), 'utf8').trim().split('\n')).toEqual(['start']);
  });
});

describe('serviceTarget', () => {
  const inv = (layout: 'kubeadm' | 'k3s' | 'lab') =>
    Inventory.parse(
      inventoryOf(
        { layout, lab: { stateDir: '/var/lib/lab/' }, nodes: [{ name: 'cp-1', roles: ['control-plane'] }, { name: 'w-1' }] },
        'x',
      ),
    );
  it('picks the manager by layout', () => {
    const [cp, w] = inv('kubeadm').spec.nodes;
    if (!cp || !w) throw new Error('two nodes expected');
    expect(serviceTarget(inv('kubeadm'), cp, 'etcd')).toMatchObject({
      manager: 'static-pod',
      manifest: '/etc/kubernetes/manifests/etcd.yaml',
    });
    expect(serviceTarget(inv('kubeadm'), w, 'kubelet')).toMatchObject({ manager: 'systemd', unit: 'kubelet' });
    expect(serviceTarget(inv('k3s'), cp, 'kube-scheduler')).toMatchObject({ manager: 'systemd', unit: 'k3s' });
    expect(serviceTarget(inv('k3s'), w, 'kubelet')).toMatchObject({ manager: 'systemd', unit: 'k3s-agent' });
    expect(serviceTarget(inv('lab'), w, 'kubelet')).toEqual({
      manager: 'process',
      service: 'kubelet',
      dir: '/var/lib/lab/nodes/w-1/kubelet',
    });
  });
});
