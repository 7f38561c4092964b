import { NOT_YET_EXIT } from '../nodes/services/script.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runNodeScript, scratchNode, writeNodeKubeconfig } from '../testing/node-script.js';
import { eventually } from '../testing/wait.js';
import type { KubeAccess } from '../kube/types.js';
import { controlPlaneInventory } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import action from './disable-taint-eviction.js';
import { applyScript, exclusionsOf, kubeadmTarget, nodeSideRevertScript, revertScript, stateScript } from './parts/taint-eviction.js';
import { failingOn } from '../testing/fake-nodes.js';

const inventory = controlPlaneInventory;

const server = (gitVersion: string): Partial<KubeAccess> => ({
  // the version, and the nodes and their Leases (none back with a lifecycle taint) the revert checks before evicting again
  raw: async (path) =>
    path === '/version'
      ? { status: 200, body: JSON.stringify({ gitVersion }) }
      : path === '/api/v1/nodes' || path === '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases'
        ? { status: 200, body: JSON.stringify({ items: [] }) }
        : { status: 404, body: '' },
});

actionTester(action, {
  inventory: inventory('kubeadm'),
  valid: [
    {
      name: 'kubeadm on 1.37: keeps the manifest outside the manifests directory and edits it there',
      kube: server('v1.37.2'),
      check(r) {
        assert.equal(action.meta.kind, 'remediation');
        assert.equal(action.meta.minKubernetesMinor, 29);
        assert.deepEqual(r.prepared.target, {
          layout: 'kubeadm',
          manifest: '/etc/kubernetes/manifests/kube-controller-manager.yaml',
          backup: '/etc/kubernetes/kube-runbook-parked/kube-controller-manager.yaml.before-disable-taint-eviction',
        });
        assert.equal(r.prepared.changed, true);
        assert.deepEqual(
          r.scripts.map((s) => s.script.split('\n')[0]),
          [
            '# kube-runbook: disable-taint-eviction preflight (kubeadm)',
            '# kube-runbook: disable-taint-eviction state (kubeadm)',
            '# kube-runbook: disable-taint-eviction apply (kubeadm)',
            '# kube-runbook: disable-taint-eviction revert (kubeadm)',
            '# kube-runbook: disable-taint-eviction revert (kubeadm)',
          ],
        );
        // the node's dead-man waits for the nodes as the revert does, then runs the revert's own lines
        assert.match(r.nodeSideRevert!, /^# kube-runbook: disable-taint-eviction node-side revert \(kubeadm\)/);
        assert.ok(r.nodeSideRevert!.includes("kubeconfigs='/etc/kubernetes/admin.conf"));
        assert.ok(r.nodeSideRevert!.includes('mv -f "$backup" "$manifest"'));
        // 1.36+: the device taint eviction controller is turned off with it, and back on by the revert and the dead-man
        assert.equal(r.prepared.off, '-taint-eviction-controller,-device-taint-eviction-controller');
        for (const s of [r.scripts.find((s) => s.phase === 'apply')!.script, r.nodeSideRevert!])
          assert.match(s, /^flag=-taint-eviction-controller,-device-taint-eviction-controller$/m);
        assert.equal(r.ctx.log.lines.filter((l) => /turns off the device-taint-eviction-controller too/.test(l.msg)).length, 1);
      },
    },
    {
      name: 'k3s: a config drop-in and a restart of the k3s unit',
      kube: server('v1.34.4+k3s1'),
      inventory: inventory('k3s'),
      check(r) {
        assert.equal(r.prepared.target.layout, 'k3s');
        const apply = r.scripts.find((s) => s.phase === 'apply')!.script;
        assert.match(apply, /systemctl restart "\$unit"/);
        // 1.34: device taints evict only with the alpha gate on; the flag stays as on 1.29-1.35
        assert.equal(r.prepared.off, '-taint-eviction-controller');
        assert.match(apply, /^k3s_controllers='\*,tokencleaner,-taint-eviction-controller'$/m);
        assert.deepEqual(
          r.ctx.log.lines.filter((l) => /device-taint/.test(l.msg)),
          [],
        );
      },
    },
    {
      name: 'lab: extra-args of the controller-manager service, only this lab instance',
      kube: server('v1.37.2'),
      inventory: inventory('lab'),
      check(r) {
        assert.match(r.scripts.find((s) => s.phase === 'apply')!.script, /"--controllers=\*,\$flag"/);
        assert.deepEqual(r.prepared.target, { layout: 'lab', dir: '/var/lib/kr-lab/nodes/cp-1/kube-controller-manager' });
        assert.match(r.scripts[0]!.script, /^match=\/var\/lib\/kr-lab\/nodes\/cp-1\/kube-controller-manager$/m);
      },
    },
    {
      name: 'already disabled: apply and revert leave it as it was',
      kube: server('v1.37.2'),
      handler: ({ script }) => ({ code: 0, stdout: script.includes('disable-taint-eviction state') ? 'disabled\n' : '', stderr: '' }),
      check(r) {
        assert.equal(r.prepared.changed, false);
        assert.deepEqual(
          r.scripts.map((s) => s.phase),
          ['preflight', 'prepare'],
        );
        assert.equal(r.nodeSideRevert, undefined);
      },
    },
  ],
  invalid: [
    {
      name: 'a server older than 1.29 is refused, naming stop-controller-manager',
      kube: server('v1.20.2'),
      phase: 'preflight',
      code: 'ACTION_UNSUPPORTED',
    },
    {
      name: 'a server whose version cannot be read',
      kube: { raw: async () => ({ status: 503, body: '' }) },
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
    },
    {
      name: 'the controller-manager does not come back healthy',
      kube: server('v1.37.2'),
      handler: failingOn((script) => script.includes('disable-taint-eviction apply'), 'not healthy 120 s later'),
      phase: 'apply',
      code: 'SERVICE_RESTART_FAILED',
    },
  ],
  hostile: (value) => ({
    name: 'hostile lab paths',
    kube: server('v1.37.2'),
    inventory: inventory('lab', value, `/x/${value}`),
    node: value,
  }),
});

describe('disable-taint-eviction on a kubeadm manifest (the scripts run for real on a copy)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kr-dte-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const manifest = (extra: string) =>
    [
      'apiVersion: v1',
      'kind: Pod',
      'spec:',
      '  containers:',
      '  - command:',
      '    - kube-controller-manager',
      '    - --bind-address=127.0.0.1',
      extra,
      '    - --leader-elect=true',
      '    image: registry.k8s.io/kube-controller-manager:v1.37.2',
      '',
    ]
      .filter((l) => l !== '')
      .join('\n') + '\n';
  // no controller-manager runs here: the scripts edit the file, then wait 0 s for it and fail; the edit is what counts
  const sh = (text: string) => spawnSync('/bin/sh', ['-c', text], { encoding: 'utf8' });
  const target = (name: string) => ({
    layout: 'kubeadm' as const,
    manifest: join(dir, `${name}.yaml`),
    backup: join(dir, 'parked', `${name}.yaml.orig`),
  });

  it('adds --controllers right after the command, and the revert puts the original back byte for byte', () => {
    const t = target('plain');
    const original = manifest('');
    writeFileSync(t.manifest, original);
    // no controller-manager runs here: the wait for it ends "not yet", which a revert tries again
    expect(sh(applyScript(t, 0)).status).toBe(NOT_YET_EXIT);
    expect(readFileSync(t.manifest, 'utf8')).toBe(
      original.replace(
        '    - kube-controller-manager\n',
        '    - kube-controller-manager\n    - --controllers=*,-taint-eviction-controller\n',
      ),
    );
    expect(readFileSync(t.backup, 'utf8')).toBe(original);
    expect(sh(revertScript(t, 0)).status).toBe(NOT_YET_EXIT);
    expect(readFileSync(t.manifest, 'utf8')).toBe(original);
  });

  it('appends the exclusion to an existing --controllers list; without the original, the revert removes just that', () => {
    const t = target('listed');
    const original = manifest('    - --controllers=*,bootstrapsigner,tokencleaner');
    writeFileSync(t.manifest, original);
    sh(applyScript(t, 0));
    expect(readFileSync(t.manifest, 'utf8')).toContain('    - --controllers=*,bootstrapsigner,tokencleaner,-taint-eviction-controller\n');
    rmSync(t.backup);
    sh(revertScript(t, 0));
    expect(readFileSync(t.manifest, 'utf8')).toBe(original);
  });

  it('1.36+: turns off the device taint eviction controller too; without the original, the revert removes both', () => {
    const t = target('device');
    const original = manifest('');
    writeFileSync(t.manifest, original);
    const off = exclusionsOf(true);
    expect(sh(applyScript(t, 0, off)).status).toBe(NOT_YET_EXIT);
    expect(readFileSync(t.manifest, 'utf8')).toContain(
      '    - kube-controller-manager\n    - --controllers=*,-taint-eviction-controller,-device-taint-eviction-controller\n',
    );
    rmSync(t.backup);
    sh(revertScript(t, 0, off));
    expect(readFileSync(t.manifest, 'utf8')).toBe(
      original.replace('    - kube-controller-manager\n', '    - kube-controller-manager\n    - --controllers=*\n'),
    );
  });
});

describe("disable-taint-eviction's node-side revert waits for the nodes first (the script runs for real, the apiserver is a stub curl)", () => {
  const { dir, svc, bin } = scratchNode('kr-dte-node-', 'kube-controller-manager');
  const nodes = join(dir, 'nodes.json');
  const started = join(dir, 'started');
  writeNodeKubeconfig(join(svc, 'kubeconfig'), 'https://10.0.0.1:6443', 'kcm', 'secret-token');
  writeFileSync(join(svc, 'extra-args'), '--controllers=*,-taint-eviction-controller\n');
  writeFileSync(join(svc, 'stop'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  writeFileSync(join(svc, 'start'), `#!/bin/sh\ndate +%s >>'${started}'\n`, { mode: 0o755 });
  // the apiserver: curl answers with nodes.json when it is there, fails (cannot connect) when not; no kubectl
  writeFileSync(join(bin, 'curl'), `#!/bin/sh\necho "$@" >>'${dir}/curl.args'\n[ -f '${nodes}' ] || exit 7\ncat '${nodes}'\n`, {
    mode: 0o755,
  });
  writeFileSync(join(bin, 'kubectl'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  const node = (name: string, ready: string, taint?: string) => ({
    metadata: { name },
    spec: taint
      ? {
          taints: [
            { key: taint, effect: 'NoSchedule' },
            { key: taint, effect: 'NoExecute', timeAdded: '2026-01-01T00:00:00Z' },
          ],
        }
      : {},
    status: {
      conditions: [
        { type: 'MemoryPressure', status: 'False' },
        { type: 'Ready', status: ready },
      ],
    },
  });
  // pretty-printed, as an apiserver answers a client it takes for curl
  const list = (...items: object[]) => JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', items }, null, 2);
  const run = (capS: number) => runNodeScript(nodeSideRevertScript({ layout: 'lab', dir: svc }, 0, undefined, capS, 1), bin);
  const until = eventually;

  it('restores taint eviction only once every node is Ready and no lifecycle NoExecute taint is left, saying why it waits', async () => {
    writeFileSync(nodes, list(node('node-1', 'True'), node('node-2', 'Unknown', 'node.kubernetes.io/unreachable')));
    const r = run(600);
    expect(
      await until(() =>
        r.out().includes('not restoring taint eviction yet: 1 of 2 node(s) not Ready, 1 unreachable/not-ready NoExecute taint(s)'),
      ),
    ).toBe(true);
    // Ready again, its taint not yet removed by the lifecycle controller: still not
    writeFileSync(nodes, list(node('node-1', 'True'), node('node-2', 'True', 'node.kubernetes.io/unreachable')));
    expect(await until(() => r.out().includes('0 of 2 node(s) not Ready, 1 unreachable/not-ready NoExecute taint(s)'))).toBe(true);
    expect(existsSync(started)).toBe(false);
    writeFileSync(nodes, list(node('node-1', 'True'), node('node-2', 'True')));
    // no controller-manager process runs here: after the restart its health wait ends "not yet"
    expect(await r.exit).toBe(NOT_YET_EXIT);
    expect(r.out()).toMatch(
      /nodes settled \(0 of 2 node\(s\) not Ready, 0 unreachable\/not-ready NoExecute taint\(s\)\): restoring taint eviction/,
    );
    expect(readFileSync(started, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(existsSync(join(svc, 'extra-args'))).toBe(false);
    // the kubeconfig's token went in a header file, not on curl's command line
    expect(readFileSync(join(dir, 'curl.args'), 'utf8')).not.toContain('secret-token');
  });

  it('fails closed while the nodes cannot be read, and restores taint eviction anyway at the hard cap, saying so', async () => {
    rmSync(nodes, { force: true });
    rmSync(started, { force: true });
    writeFileSync(join(svc, 'extra-args'), '--controllers=*,-taint-eviction-controller\n');
    const r = run(2);
    expect(await r.exit).toBe(NOT_YET_EXIT);
    expect(r.out()).toContain('not restoring taint eviction yet: the nodes cannot be read');
    expect(r.out()).toMatch(/still the nodes cannot be read .* after 2 s: restoring taint eviction anyway \(the hard cap\)/);
    expect(existsSync(started)).toBe(true);
  });
});

describe('the controller-manager a kubeadm node reads: only the static pod the kubelet started (the script runs for real)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kr-dte-proc-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const proc = join(dir, 'proc');
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  /** A process in the stand-in /proc: its command line, network namespace and cgroup. `self` is the shell. */
  const fakeProc = (pid: string, cgroup: string, ...argv: string[]) => {
    mkdirSync(join(proc, pid, 'ns'), { recursive: true });
    symlinkSync('net:[4026531840]', join(proc, pid, 'ns', 'net'));
    writeFileSync(join(proc, pid, 'cgroup'), `0::${cgroup}\n`);
    writeFileSync(join(proc, pid, 'cmdline'), argv.map((a) => `${a}\0`).join(''));
  };
  fakeProc('self', '/user.slice');
  // someone's process named like the component, claiming taint eviction is off; listed first
  fakeProc(
    '111',
    '/user.slice/user-1000.slice/session-2.scope',
    '/tmp/kube-controller-manager',
    '--controllers=*,-taint-eviction-controller',
  );
  // the static pod, with taint eviction on
  fakeProc(
    '222',
    '/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-1.scope',
    'kube-controller-manager',
    '--kubeconfig=/etc/kubernetes/controller-manager.conf',
  );
  writeFileSync(join(bin, 'pgrep'), '#!/bin/sh\nprintf "111\\n222\\n"\n', { mode: 0o755 });
  writeFileSync(join(bin, 'crictl'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  writeFileSync(join(bin, 'curl'), '#!/bin/sh\nprintf 200\n', { mode: 0o755 });
  const state = (script: string) =>
    spawnSync('/bin/sh', ['-c', script], {
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, KR_PROC_ROOT: proc },
      encoding: 'utf8',
    }).stdout.trim();

  it("reads the static pod's command line, not an impostor's: taint eviction is on", () => {
    expect(state(stateScript(kubeadmTarget()))).toBe('enabled');
  });

  it('without the check, the impostor listed first is taken for it: an apply that changed nothing would look done', () => {
    const unchecked = stateScript(kubeadmTarget()).replace(/^static_pod=1$/m, "static_pod=''");
    expect(unchecked).not.toBe(stateScript(kubeadmTarget()));
    expect(state(unchecked)).toBe('disabled');
  });
});
