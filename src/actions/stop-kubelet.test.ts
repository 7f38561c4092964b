import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { layoutInventory, type TestLayout } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import action from './stop-kubelet.js';
import { failingOn } from '../testing/fake-nodes.js';

const inventory = (layout: TestLayout, node = 'node-1', stateDir?: string): InventoryInput =>
  layoutInventory(
    layout,
    [
      { name: node, roles: ['worker'] },
      { name: 'server-1', roles: ['control-plane'] },
    ],
    stateDir,
  );

actionTester(action, {
  inventory: inventory('kubeadm'),
  valid: [
    {
      name: 'kubeadm: systemctl stop kubelet; revert waits for its healthz',
      check(r) {
        assert.equal(action.meta.defaultNodes, 'workers');
        assert.deepEqual(r.prepared.target, {
          manager: 'systemd',
          service: 'kubelet',
          unit: 'kubelet',
          healthUrl: 'http://127.0.0.1:10248/healthz',
        });
        assert.match(r.scripts.find((s) => s.phase === 'apply')!.script, /systemctl stop "\$unit"/);
        assert.match(r.nodeSideRevert!, /systemctl start "\$unit"/);
        assert.match(r.nodeSideRevert!, /kr_http_ok "\$health_url"/);
      },
    },
    {
      name: 'k3s agent: k3s-agent',
      inventory: inventory('k3s'),
      check(r) {
        assert.equal(r.prepared.target.manager === 'systemd' && r.prepared.target.unit, 'k3s-agent');
        assert.equal(r.ctx.log.lines.filter((l) => l.level === 'warn').length, 0);
      },
    },
    {
      name: 'k3s server: the kubelet is the k3s unit, and preflight says so',
      inventory: inventory('k3s'),
      node: 'server-1',
      check(r) {
        assert.equal(r.prepared.target.manager === 'systemd' && r.prepared.target.unit, 'k3s');
        assert.ok(r.ctx.log.lines.some((l) => l.level === 'warn' && /whole control plane/.test(l.msg)));
      },
    },
    {
      name: 'lab: the kubelet simulator directory of the node',
      inventory: inventory('lab'),
      check(r) {
        assert.deepEqual(r.prepared.target, { manager: 'process', service: 'kubelet', dir: '/var/lib/kr-lab/nodes/node-1/kubelet' });
      },
    },
  ],
  invalid: [
    {
      name: 'a node without systemd',
      handler: failingOn(
        (script) => script.startsWith('# kube-runbook: systemd preflight'),
        'systemctl not found: this node does not run systemd',
      ),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /does not run systemd/,
    },
  ],
  hostile: (value) => ({ name: 'hostile lab paths', inventory: inventory('lab', value, `/x/${value}`), node: value }),
});
