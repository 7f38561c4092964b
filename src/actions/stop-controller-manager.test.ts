import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { actionTester } from '../testing/action-tester.js';
import action from './stop-controller-manager.js';

const inventory = (layout: 'kubeadm' | 'k3s' | 'lab', node = 'cp-1', stateDir = '/var/lib/kr-lab'): InventoryInput => ({
  apiVersion: 'kube-runbook/v1',
  kind: 'Inventory',
  metadata: { name: 'test' },
  spec: { layout, ...(layout === 'lab' ? { lab: { stateDir } } : {}), nodes: [{ name: node, roles: ['control-plane'] }] },
});

actionTester(action, {
  inventory: inventory('kubeadm'),
  valid: [
    {
      name: 'kubeadm: parks its manifest; health from the manifest port',
      check(r) {
        assert.equal(action.meta.kind, 'remediation');
        assert.deepEqual(action.meta.defaultNodes, 'control-plane');
        assert.equal(r.prepared.target.manager, 'static-pod');
        const start = r.nodeSideRevert!;
        assert.match(start, /^manifest=\/etc\/kubernetes\/manifests\/kube-controller-manager\.yaml$/m);
        assert.match(start, /^parked=\/etc\/kubernetes\/kube-runbook-parked\/kube-controller-manager\.yaml$/m);
        assert.match(start, /^health_port=10257$/m);
        assert.match(start, /^port_flag=--secure-port$/m);
        // process names are cut at 15 characters: the full command line is matched instead of pgrep -x
        assert.doesNotMatch(start, /pgrep -x/);
      },
    },
    {
      name: 'k3s: the k3s unit, with a warning that the whole server stops',
      inventory: inventory('k3s'),
      check(r) {
        assert.deepEqual(r.prepared.target, { manager: 'systemd', service: 'kube-controller-manager', unit: 'k3s', healthUrl: 'https://127.0.0.1:6443/readyz' });
        assert.ok(r.ctx.log.lines.some((l) => l.level === 'warn' && /whole k3s server/.test(l.msg)));
      },
    },
    {
      name: 'lab: the kube-controller-manager service directory on the node',
      inventory: inventory('lab'),
      check(r) {
        assert.deepEqual(r.prepared.target, { manager: 'process', service: 'kube-controller-manager', dir: '/var/lib/kr-lab/nodes/cp-1/kube-controller-manager' });
      },
    },
  ],
  invalid: [
    {
      name: 'a status that is neither running nor stopped',
      inventory: inventory('lab'),
      handler: ({ script }) => ({ code: script.startsWith('# kube-runbook: process status') ? 2 : 0, stdout: '', stderr: 'status broken' }),
      phase: 'prepare',
      code: 'SERVICE_STATUS_FAILED',
    },
  ],
  hostile: (value) => ({ name: 'hostile lab paths', inventory: inventory('lab', value, `/x/${value}`), node: value }),
});
