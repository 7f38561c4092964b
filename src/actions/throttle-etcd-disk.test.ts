import assert from 'node:assert/strict';
import { describe, expect, it } from 'vitest';
import type { InventoryInput } from '../inventory/schema.js';
import { writeLimitsScript } from './parts/cgroup-io.js';
import { layoutInventory, scriptPurpose, type TestLayout } from '../testing/inventories.js';
import { actionTester, shellSandbox } from '../testing/action-tester.js';
import type { FakeHandler } from '../testing/fake-nodes.js';
import action from './throttle-etcd-disk.js';

const inventory = (layout: TestLayout = 'lab', node = 'cp-1', stateDir = '/nonexistent/lab'): InventoryInput =>
  layoutInventory(layout, [{ name: node, roles: ['control-plane', 'etcd'] }], stateDir);

const purpose = scriptPurpose;

const node =
  (o: { pid?: string; inspect?: string[]; limits?: string[] } = {}): FakeHandler =>
  ({ script }) => {
    const p = purpose(script);
    const ok = (lines: string[]) => ({ code: 0, stdout: lines.join('\n') + '\n', stderr: '' });
    if (p.endsWith(' pid etcd')) return ok([o.pid ?? '4242']);
    if (p.endsWith(' inspect')) return ok(o.inspect ?? ['cgroup=1 /kube-runbook-lab/etcd', 'datadir=/var/lib/lab/etcd', 'device=254:0']);
    if (p.endsWith(' read limits')) return ok(o.limits ?? ['rbps=max', 'wbps=max', 'riops=max', 'wiops=max']);
    return ok([]);
  };

actionTester(action, {
  inventory: inventory(),
  valid: [
    {
      name: 'cgroup v1 (the lab): blkio.throttle files, previous limits recorded',
      params: { writeIops: 10, writeBps: '1Mi' },
      handler: node({ limits: ['rbps=max', 'wbps=max', 'riops=max', 'wiops=500'] }),
      check(r) {
        assert.deepEqual(r.prepared, {
          node: 'cp-1',
          pid: 4242,
          dataDir: '/var/lib/lab/etcd',
          version: 1,
          cgroup: '/kube-runbook-lab/etcd',
          device: '254:0',
          limits: { wiops: '10', wbps: '1048576' },
          previous: { rbps: 'max', wbps: 'max', riops: 'max', wiops: '500' },
        });
        const apply = r.scripts.find((s) => s.phase === 'apply')!.script;
        assert.match(apply, /"\$cg\/blkio\.throttle\.write_iops_device" "\$dev 10"/);
        assert.match(apply, /"\$cg\/blkio\.throttle\.write_bps_device" "\$dev 1048576"/);
        assert.match(r.nodeSideRevert!, /write_iops_device" "\$dev 500"/, 'the revert puts the earlier limit back');
        assert.match(r.nodeSideRevert!, /write_bps_device" "\$dev 0"/, 'v1 removes a limit with 0');
        assert.match(r.nodeSideRevert!, /nothing to undo"; exit 0/, 'a cgroup that is gone needs no revert');
      },
    },
    {
      name: 'cgroup v2: one io.max line',
      params: { readIops: 50, writeIops: 20 },
      inventory: inventory('kubeadm'),
      handler: node({
        inspect: ['cgroup=2 /kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope', 'datadir=/var/lib/etcd', 'device=8:0'],
      }),
      check(r) {
        const apply = r.scripts.find((s) => s.phase === 'apply')!.script;
        assert.match(apply, /"\$cg\/io\.max" "\$dev riops=50 wiops=20"/);
        assert.match(r.nodeSideRevert!, /"\$cg\/io\.max" "\$dev rbps=max wbps=max riops=max wiops=max"/);
      },
    },
    {
      name: 'k3s: etcd is the k3s server process',
      params: { writeIops: 5 },
      inventory: inventory('k3s'),
      handler: node(),
      check(r) {
        assert.match(r.scripts[0]!.script, /^unit=k3s$/m);
        assert.match(r.scripts.find((s) => purpose(s.script).endsWith(' inspect'))!.script, /^k3s=1$/m);
      },
    },
  ],
  invalid: [
    { name: 'no limit given', params: {}, phase: 'params', message: /at least one of/ },
    { name: 'a byte size with a bad unit', params: { writeBps: '1MB' }, phase: 'params' },
    { name: 'zero iops', params: { writeIops: 0 }, phase: 'params' },
    { name: 'a relative data dir', params: { writeIops: 5, dataDir: 'etcd' }, phase: 'params' },
    {
      name: 'etcd not running',
      params: { writeIops: 5 },
      handler: () => ({ code: 3, stdout: '', stderr: '' }),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
    },
    {
      name: 'etcd in the root cgroup',
      params: { writeIops: 5 },
      handler: node({ inspect: ['cgroup=1 /', 'datadir=/d', 'device=8:0'] }),
      phase: 'prepare',
      code: 'ETCD_CGROUP_UNSUITABLE',
    },
    {
      name: 'the node says something that is not a device',
      params: { writeIops: 5 },
      handler: node({ inspect: ['cgroup=1 /x', 'datadir=/d', 'device=$(reboot)'] }),
      phase: 'prepare',
      code: 'ETCD_DISK_UNKNOWN',
    },
  ],
  hostile: (value) => ({
    name: 'hostile node name, state dir, data dir and cgroup path',
    params: { writeIops: 5, dataDir: `/var/${value}` },
    inventory: inventory('lab', value, `/tmp/${value}`),
    node: value,
    handler: node({ inspect: [`cgroup=1 /x/${value}`, `datadir=/var/${value}`, 'device=254:0'] }),
  }),
});

describe('throttle-etcd-disk scripts', () => {
  it('refuse limits that are not numbers', () => {
    expect(() => writeLimitsScript('apply', { version: 1, cgroup: '/x', device: '8:0' }, { wiops: '1; reboot' }, false)).toThrow(
      /number or max/,
    );
  });

  it('write through a private mount when the hierarchy is not visible (under ip netns exec)', () => {
    const sb = shellSandbox(); // awk finds no cgroup mount in /proc/self/mounts
    try {
      const r = sb.run(writeLimitsScript('apply', { version: 1, cgroup: '/lab/etcd', device: '254:0' }, { wiops: '10' }, false));
      expect(r.code).toBe(0);
      const log = sb.calls().join('\n');
      expect(log).toMatch(/^unshare -m sh -c /m);
      expect(log).toMatch(/ kr 1 blkio printf .* \/lab\/etcd\/blkio\.throttle\.write_iops_device 254:0 10$/m);
    } finally {
      sb.dispose();
    }
  });
});
