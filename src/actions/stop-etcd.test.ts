import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { layoutInventory, type TestLayout, scriptPurpose } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import type { FakeHandler } from '../testing/fake-nodes.js';
import action from './stop-etcd.js';

const inventory = (layout: TestLayout, stateDir?: string, first = 'cp-1'): InventoryInput =>
  layoutInventory(
    layout,
    [
      { name: first, roles: ['control-plane', 'etcd'] },
      { name: 'cp-2', roles: ['control-plane', 'etcd'] },
      { name: 'cp-3', roles: ['control-plane', 'etcd'] },
      { name: 'node-1', roles: ['worker'] },
    ],
    stateDir,
  );

const purpose = scriptPurpose;
const ok = { code: 0, stdout: 'running\n', stderr: '' };
const running: FakeHandler = () => ok;
/** Every member runs except `down`, whose status says stopped. */
const downOn =
  (...down: string[]): FakeHandler =>
  ({ node, script }) =>
    down.includes(node) && purpose(script).endsWith(' status etcd') ? { code: 3, stdout: 'stopped\n', stderr: '' } : ok;

actionTester(action, {
  inventory: inventory('lab'),
  valid: [
    {
      name: 'lab: stops one member after asking the other two whether they run',
      selection: ['cp-1'],
      handler: running,
      check(r) {
        assert.deepEqual(
          r.scripts.map((s) => [s.phase, s.node, purpose(s.script)]),
          [
            ['preflight', 'cp-1', '# kube-runbook: process preflight etcd'],
            ['prepare', 'cp-1', '# kube-runbook: process status etcd'],
            ['prepare', 'cp-2', '# kube-runbook: process status etcd'],
            ['prepare', 'cp-3', '# kube-runbook: process status etcd'],
            ['apply', 'cp-1', '# kube-runbook: process stop etcd'],
            ['revert', 'cp-1', '# kube-runbook: process start etcd'],
            ['revert-again', 'cp-1', '# kube-runbook: process start etcd'],
          ],
        );
        assert.deepEqual(r.prepared.target, { manager: 'process', service: 'etcd', dir: '/var/lib/kr-lab/nodes/cp-1/etcd' });
        assert.equal(r.nodeSideRevert, r.scripts[5]!.script, 'the dead-man runs the same start script as the revert');
      },
    },
    {
      name: 'kubeadm: parks the stacked etcd static pod',
      inventory: inventory('kubeadm'),
      handler: running,
      check(r) {
        assert.equal(r.prepared.target.manager, 'static-pod');
        assert.equal((r.prepared.target as { manifest: string }).manifest, '/etc/kubernetes/manifests/etcd.yaml');
      },
    },
    {
      name: 'allowQuorumLoss: every member may go, and the others are not asked',
      params: { allowQuorumLoss: true },
      selection: ['cp-1', 'cp-2', 'cp-3'],
      handler: downOn('cp-2'),
      check(r) {
        assert.equal(r.scripts.filter((s) => s.phase === 'prepare').length, 1);
        assert.equal(r.applied.wasRunning, true);
      },
    },
    {
      name: 'a member already stopped is left as it is: nothing stopped, nothing started, no quorum question',
      handler: downOn('cp-1'),
      check(r) {
        assert.equal(r.prepared.wasRunning, false);
        assert.deepEqual(
          r.scripts.map((s) => s.node),
          ['cp-1', 'cp-1'],
        );
      },
    },
  ],
  invalid: [
    { name: 'unknown params', params: { force: true }, phase: 'params', code: 'INVALID_PARAMS' },
    { name: 'allowQuorumLoss is a boolean', params: { allowQuorumLoss: 'yes' }, phase: 'params', code: 'INVALID_PARAMS' },
    {
      name: 'a selection of two of three members leaves no quorum',
      selection: ['cp-1', 'cp-2'],
      handler: running,
      phase: 'preflight',
      code: 'ETCD_QUORUM_LOSS',
      message: /leaves 1 of 3 etcd member\(s\), below the quorum of 2/,
    },
    {
      name: 'a member already stopped counts: stopping a second one is refused before anything is stopped',
      selection: ['cp-1'],
      handler: downOn('cp-3'),
      phase: 'prepare',
      code: 'ETCD_QUORUM_LOSS',
      message: /cp-3 already stopped/,
    },
    {
      name: 'k3s embeds etcd: refused with the reason',
      inventory: inventory('k3s'),
      handler: running,
      phase: 'preflight',
      code: 'ETCD_EMBEDDED',
      message: /stop-apiserver stops the whole k3s server/,
    },
    { name: 'a worker is no etcd member', node: 'node-1', handler: running, phase: 'preflight', code: 'NOT_AN_ETCD_MEMBER' },
  ],
  hostile: (value) => ({
    name: 'hostile member name and state directory',
    inventory: inventory('lab', `/tmp/${value}`, value),
    node: value,
    handler: running,
  }),
});
