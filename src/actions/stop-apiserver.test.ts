import assert from 'node:assert/strict';
import type { InventoryInput } from '../inventory/schema.js';
import { layoutInventory, type TestLayout, scriptPurpose } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import { type FakeHandler, failingOn } from '../testing/fake-nodes.js';
import action from './stop-apiserver.js';

const inventory = (layout: TestLayout, stateDir?: string, node = 'cp-1'): InventoryInput =>
  layoutInventory(
    layout,
    [
      { name: node, roles: ['control-plane'] },
      { name: 'node-1', roles: ['worker'] },
    ],
    stateDir,
  );

/** The service is running until the stop script ran, stopped after. */
const purpose = scriptPurpose;
const running: FakeHandler = () => ({ code: 0, stdout: 'running\n', stderr: '' });
const stopped: FakeHandler = ({ script }) =>
  purpose(script).endsWith(' status kube-apiserver') ? { code: 3, stdout: 'stopped\n', stderr: '' } : { code: 0, stdout: '', stderr: '' };
const purposes = (scripts: { script: string }[]) => scripts.map((s) => purpose(s.script));

actionTester(action, {
  inventory: inventory('kubeadm'),
  valid: [
    {
      name: 'kubeadm: parks the manifest, puts it back on revert',
      handler: running,
      check(r) {
        assert.deepEqual(purposes(r.scripts), [
          '# kube-runbook: static-pod preflight kube-apiserver',
          '# kube-runbook: static-pod status kube-apiserver',
          '# kube-runbook: static-pod stop kube-apiserver',
          '# kube-runbook: static-pod start kube-apiserver',
          '# kube-runbook: static-pod start kube-apiserver',
        ]);
        assert.equal(r.prepared.wasRunning, true);
        assert.deepEqual(r.prepared.target, {
          manager: 'static-pod',
          service: 'kube-apiserver',
          manifest: '/etc/kubernetes/manifests/kube-apiserver.yaml',
          parked: '/etc/kubernetes/kube-runbook-parked/kube-apiserver.yaml',
          process: 'kube-apiserver',
          health: { scheme: 'https', port: 6443, path: '/readyz', portFlag: '--secure-port' },
        });
        assert.equal(r.nodeSideRevert, r.scripts[3]!.script, 'the dead-man runs the same start script as the revert');
        assert.match(r.nodeSideRevert!, /mv -f "\$parked" "\$manifest"/);
      },
    },
    {
      name: 'k3s: stops the k3s unit and says it takes the whole server down',
      inventory: inventory('k3s'),
      handler: running,
      check(r) {
        assert.deepEqual(r.prepared.target, {
          manager: 'systemd',
          service: 'kube-apiserver',
          unit: 'k3s',
          healthUrl: 'https://127.0.0.1:6443/readyz',
        });
        assert.match(r.scripts[2]!.script, /systemctl stop "\$unit"/);
        assert.ok(r.ctx.log.lines.some((l) => l.level === 'warn' && /whole control plane/.test(l.msg)));
      },
    },
    {
      name: 'lab: runs the service directory scripts',
      inventory: inventory('lab', '/tmp/lab/'),
      params: { timeout: '30s' },
      handler: running,
      check(r) {
        assert.deepEqual(r.prepared, {
          node: 'cp-1',
          target: { manager: 'process', service: 'kube-apiserver', dir: '/tmp/lab/nodes/cp-1/kube-apiserver' },
          timeoutS: 30,
          wasRunning: true,
        });
        assert.match(r.scripts[2]!.script, /^wait_s=30$/m);
      },
    },
    {
      name: 'a service that was already stopped is left stopped, and nothing is started on revert',
      inventory: inventory('lab'),
      handler: stopped,
      check(r) {
        assert.equal(r.prepared.wasRunning, false);
        assert.deepEqual(purposes(r.scripts), [
          '# kube-runbook: process preflight kube-apiserver',
          '# kube-runbook: process status kube-apiserver',
        ]);
        assert.doesNotMatch(r.nodeSideRevert!, /start/);
      },
    },
  ],
  invalid: [
    { name: 'unknown params', params: { force: true }, phase: 'params', code: 'INVALID_PARAMS' },
    { name: 'a timeout without a unit', params: { timeout: '30' }, phase: 'params', code: 'INVALID_PARAMS' },
    {
      name: 'preflight refuses when the node says the manifest is missing',
      handler: failingOn((script) => purpose(script).includes(' preflight '), 'no static pod manifest x\n'),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /no static pod manifest/,
    },
    {
      name: 'a failed stop fails apply',
      handler: failingOn((script) => purpose(script).includes(' stop '), 'still running\n'),
      phase: 'apply',
      code: 'SERVICE_STOP_FAILED',
    },
    {
      name: 'a lab inventory without a state directory',
      inventory: { ...inventory('lab'), spec: { ...inventory('lab').spec, lab: undefined } },
      phase: 'preflight',
      code: 'LAB_STATE_DIR_MISSING',
    },
  ],
  hostile: (value) => ({
    name: 'hostile node name and state directory',
    inventory: inventory('lab', `/tmp/${value}`, value),
    node: value,
    handler: running,
  }),
});
