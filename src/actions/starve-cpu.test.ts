import assert from 'node:assert/strict';
import { describe, expect, it } from 'vitest';
import type { InventoryInput } from '../inventory/schema.js';
import { readCpuScript, writeCpuScript } from './parts/cgroup-cpu.js';
import { layoutInventory, scriptPurpose, type TestLayout } from '../testing/inventories.js';
import { actionTester, shellSandbox } from '../testing/action-tester.js';
import type { FakeHandler } from '../testing/fake-nodes.js';
import action from './starve-cpu.js';

const inventory = (layout: TestLayout = 'lab', node = 'rnode-1', stateDir = '/nonexistent/lab'): InventoryInput =>
  layoutInventory(
    layout,
    [
      { name: node, roles: ['worker'] },
      { name: 'cp-1', roles: ['control-plane', 'etcd'] },
    ],
    stateDir,
  );

const purpose = scriptPurpose;

const node =
  (o: { pid?: string; cgroup?: string; quota?: string[] } = {}): FakeHandler =>
  ({ script }) => {
    const p = purpose(script);
    const ok = (lines: string[]) => ({ code: 0, stdout: lines.join('\n') + '\n', stderr: '' });
    if (/ pid [a-z-]+$/.test(p)) return ok([o.pid ?? '4242']);
    if (p.endsWith(' inspect')) return ok([o.cgroup ?? 'cgroup=1 /kube-runbook-lab-rnode-1/kubelet']);
    if (p.endsWith(' read quota')) return ok(o.quota ?? ['quota=max', 'period=100000']);
    return ok([]);
  };

const phaseScript = (r: { scripts: { phase: string; script: string }[] }, phase: string) =>
  r.scripts.find((s) => s.phase === phase)!.script;

actionTester(action, {
  inventory: inventory(),
  valid: [
    {
      name: "cgroup v1 (a lab real node's kubelet): cfs quota per a 100 ms period, the earlier values put back",
      params: { component: 'kubelet', quota: '5%' },
      handler: node({ quota: ['quota=max', 'period=50000'] }),
      check(r) {
        assert.deepEqual(r.prepared, {
          node: 'rnode-1',
          component: 'kubelet',
          pid: 4242,
          version: 1,
          cgroup: '/kube-runbook-lab-rnode-1/kubelet',
          limit: { quota: '5000', period: '100000' },
          previous: { quota: 'max', period: '50000' },
        });
        assert.match(r.scripts[0]!.script, /^dir=\/nonexistent\/lab\/nodes\/rnode-1\/kubelet$/m, "the lab's kubelet process of that node");
        const apply = phaseScript(r, 'apply');
        assert.match(apply, /^quota=5000$/m);
        assert.match(apply, /^period=100000$/m);
        assert.match(apply, /"\$cg\/cpu\.cfs_period_us" "\$period"/);
        assert.match(apply, /"\$cg\/cpu\.cfs_quota_us" "\$v1q"/);
        assert.match(r.nodeSideRevert!, /^quota=max$/m, 'the revert lifts the quota again');
        assert.match(r.nodeSideRevert!, /^period=50000$/m, 'and puts the earlier period back');
        assert.match(r.nodeSideRevert!, /\[ "\$v1q" = max \] && v1q=-1/, 'v1 writes no limit as -1');
        assert.match(r.nodeSideRevert!, /nothing to undo"; exit 0/, 'a cgroup that is gone needs no revert');
        assert.equal(phaseScript(r, 'revert'), r.nodeSideRevert, 'the executor and the dead-man run the same restore');
      },
    },
    {
      name: 'cgroup v2 (kubeadm, the apiserver static pod): one cpu.max line, the earlier one restored exactly',
      params: { component: 'apiserver', quota: '100%' },
      inventory: inventory('kubeadm', 'cp-1'),
      node: 'cp-1',
      handler: node({
        cgroup: 'cgroup=2 /kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope',
        quota: ['quota=200000', 'period=100000'],
      }),
      check(r) {
        assert.match(r.scripts[0]!.script, /^proc=kube-apiserver$/m, 'the static pod found by its process');
        const apply = phaseScript(r, 'apply');
        assert.match(apply, /"\$cg\/cpu\.max" "\$quota \$period"/);
        assert.match(apply, /^quota=100000$/m);
        assert.match(r.nodeSideRevert!, /^quota=200000$/m);
        assert.doesNotMatch(r.nodeSideRevert!, /cfs_quota_us/);
      },
    },
    {
      name: 'k3s agent: the kubelet is the k3s-agent unit',
      params: { component: 'kubelet', quota: '12.5%' },
      inventory: inventory('k3s'),
      handler: node({ cgroup: 'cgroup=1 /system.slice/k3s-agent.service' }),
      check(r) {
        assert.match(r.scripts[0]!.script, /^unit=k3s-agent$/m);
        assert.equal(r.prepared.limit.quota, '12500');
      },
    },
  ],
  invalid: [
    { name: 'a quota of 0', params: { component: 'kubelet', quota: '0%' }, phase: 'params', message: /from 1% to 100%/ },
    { name: 'a quota over one CPU', params: { component: 'kubelet', quota: '150%' }, phase: 'params', message: /from 1% to 100%/ },
    { name: 'a quota without a percent sign', params: { component: 'kubelet', quota: 10 }, phase: 'params', message: /such as 10%/ },
    { name: 'an unknown component', params: { component: 'kube-proxy', quota: '10%' }, phase: 'params' },
    {
      name: 'the component not running',
      params: { component: 'kubelet', quota: '10%' },
      handler: () => ({ code: 3, stdout: '', stderr: '' }),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
    },
    {
      name: 'the process in the root cgroup (a simulated kubelet)',
      params: { component: 'kubelet', quota: '10%' },
      handler: node({ cgroup: 'cgroup=1 /' }),
      phase: 'preflight',
      code: 'CPU_CGROUP_UNSUITABLE',
      message: /would starve the whole node/,
    },
    {
      name: "a cgroup outside the reader's cgroup namespace (/proc shows `..`): refused, nothing written outside the hierarchy",
      params: { component: 'apiserver', quota: '10%' },
      inventory: inventory('kubeadm', 'cp-1'),
      node: 'cp-1',
      handler: node({ cgroup: 'cgroup=2 /../../kubepods.slice/cri-containerd-abc.scope' }),
      phase: 'preflight',
      code: 'CPU_CGROUP_UNSAFE',
      message: /outside the cgroup root/,
    },
    {
      name: 'a quota the node says that is not one the kernel writes',
      params: { component: 'kubelet', quota: '10%' },
      handler: node({ quota: ['quota=$(reboot)', 'period=100000'] }),
      phase: 'preflight',
      code: 'CPU_CGROUP_UNREADABLE',
    },
    {
      name: 'a cgroup v2 without the cpu controller (no cpu.max): refused before anything is applied',
      params: { component: 'kubelet', quota: '10%' },
      inventory: inventory('kubeadm'),
      handler: (call) =>
        purpose(call.script).endsWith(' read quota')
          ? { code: 1, stdout: '', stderr: 'no cpu.max in /system.slice/kubelet.service: the cpu controller is not enabled for it\n' }
          : node({ cgroup: 'cgroup=2 /system.slice/kubelet.service' })(call),
      phase: 'preflight',
      code: 'CPU_CGROUP_UNREADABLE',
      message: /the cpu controller is not enabled/,
    },
  ],
  hostile: (value) => ({
    name: 'hostile node name, state dir and cgroup path',
    params: { component: 'kubelet', quota: '10%' },
    inventory: inventory('lab', value, `/tmp/${value}`),
    node: value,
    handler: node({ cgroup: `cgroup=2 /x/${value}` }),
  }),
});

describe('starve-cpu scripts', () => {
  it('refuse limits that are not numbers', () => {
    expect(() => writeCpuScript('apply', { version: 1, cgroup: '/x' }, { quota: '1; reboot', period: '100000' }, false)).toThrow(
      /microseconds/,
    );
    expect(() => writeCpuScript('apply', { version: 2, cgroup: '/x' }, { quota: 'max', period: 'max' }, false)).toThrow(/microseconds/);
  });

  it('refuse a cgroup path with a `..` part, also one a journal brings back for the revert', () => {
    for (const cgroup of ['/x/../../etc', '/..', 'kubepods/x', '/x/./y'])
      for (const build of [
        () => readCpuScript({ version: 2, cgroup }),
        () => writeCpuScript('revert', { version: 2, cgroup }, { quota: 'max', period: '100000' }, true),
      ])
        expect(build, cgroup).toThrow(expect.objectContaining({ code: 'CPU_CGROUP_UNSAFE' }));
    expect(readCpuScript({ version: 2, cgroup: '/kubepods.slice/x..y' })).toMatch(/^cg='?\/kubepods\.slice\/x\.\.y'?$/m);
  });

  it('write through a private mount of the cpu hierarchy when it is not visible (under ip netns exec), in order', () => {
    const sb = shellSandbox({ awk: { args: '/proc/self/cgroup', stdout: 'cpu,cpuacct' } }); // no cgroup mount in /proc/self/mounts
    try {
      const r = sb.run(writeCpuScript('apply', { version: 1, cgroup: '/lab-rnode-1/kubelet' }, { quota: '5000', period: '100000' }, false));
      expect(r.code).toBe(0);
      // the v1 hierarchy is mounted with every controller it holds, as /proc/self/cgroup names them
      const writes = sb.calls().filter((l) => l.includes(' kr 1 cpu,cpuacct printf '));
      expect(writes.map((l) => l.replace(/^.* >"\$1\$2" /, ''))).toEqual([
        '/lab-rnode-1/kubelet/cpu.cfs_quota_us -1',
        '/lab-rnode-1/kubelet/cpu.cfs_period_us 100000',
        '/lab-rnode-1/kubelet/cpu.cfs_quota_us 5000',
      ]);
    } finally {
      sb.dispose();
    }
  });
});
