import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { layoutInventory, type TestLayout, scriptPurpose } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import { type FakeHandler, failingOn } from '../testing/fake-nodes.js';
import action from './stop-load-balancer.js';

const inventory = (layout: TestLayout, stateDir?: string, lb = 'lb'): InventoryInput =>
  layoutInventory(
    layout,
    [
      { name: lb, roles: ['load-balancer'] },
      { name: 'cp-1', roles: ['control-plane', 'etcd'] },
    ],
    stateDir,
  );

const purpose = scriptPurpose;
const running: FakeHandler = () => ({ code: 0, stdout: 'running\n', stderr: '' });

actionTester(action, {
  inventory: inventory('lab'),
  valid: [
    {
      name: 'lab: stops the haproxy process of the lb namespace and starts it on revert',
      handler: running,
      check(r) {
        assert.deepEqual(r.prepared.target, { manager: 'process', service: 'haproxy', dir: '/var/lib/kr-lab/nodes/lb/haproxy' });
        assert.deepEqual(
          r.scripts.map((s) => purpose(s.script)),
          [
            '# kube-runbook: process preflight haproxy',
            '# kube-runbook: process status haproxy',
            '# kube-runbook: process stop haproxy',
            '# kube-runbook: process start haproxy',
            '# kube-runbook: process start haproxy',
          ],
        );
      },
    },
    {
      name: 'kubeadm: the systemd unit haproxy',
      inventory: inventory('kubeadm'),
      handler: running,
      check(r) {
        assert.deepEqual(r.prepared.target, { manager: 'systemd', service: 'haproxy', unit: 'haproxy', healthUrl: null });
        assert.match(r.scripts[2]!.script, /systemctl stop "\$unit"/);
      },
    },
    {
      name: 'k3s: the systemd unit haproxy too',
      inventory: inventory('k3s'),
      handler: running,
      check(r) {
        assert.equal((r.prepared.target as { unit: string }).unit, 'haproxy');
      },
    },
  ],
  invalid: [
    { name: 'unknown params', params: { vip: '1.2.3.4' }, phase: 'params', code: 'INVALID_PARAMS' },
    {
      name: 'a failed stop fails apply',
      handler: failingOn((script) => purpose(script).includes(' stop '), 'still running\n', { okStdout: 'running\n' }),
      phase: 'apply',
      code: 'SERVICE_STOP_FAILED',
    },
  ],
  hostile: (value) => ({
    name: 'hostile load balancer name and state directory',
    inventory: inventory('lab', `/tmp/${value}`, value),
    node: value,
    handler: running,
  }),
});
