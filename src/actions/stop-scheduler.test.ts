import assert from 'node:assert/strict';
import { controlPlaneInventory } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import action from './stop-scheduler.js';
import { failingOn } from '../testing/fake-nodes.js';

const inventory = controlPlaneInventory;

actionTester(action, {
  inventory: inventory('kubeadm'),
  valid: [
    {
      name: 'kubeadm: parks the scheduler manifest and waits for it to go',
      params: { timeout: '45s' },
      check(r) {
        assert.equal(r.prepared.timeoutS, 45);
        const stop = r.scripts.find((s) => s.phase === 'apply')!;
        assert.match(stop.script, /^# kube-runbook: static-pod stop kube-scheduler$/m);
        assert.match(stop.script, /kr_wait "\$wait_s" gone/);
        assert.ok((stop.options.timeoutMs ?? 0) > 45_000, 'the transport waits longer than the script does');
        assert.match(r.nodeSideRevert!, /^health_port=10259$/m);
      },
    },
    {
      name: 'lab: the scheduler directory',
      inventory: inventory('lab'),
      check(r) {
        assert.deepEqual(r.prepared.target, {
          manager: 'process',
          service: 'kube-scheduler',
          dir: '/var/lib/kr-lab/nodes/cp-1/kube-scheduler',
        });
      },
    },
  ],
  invalid: [
    {
      name: 'a revert that cannot start it again',
      handler: failingOn(
        (script) => script.startsWith('# kube-runbook: static-pod start'),
        'kube-scheduler not healthy 120 s after its manifest was put back',
      ),
      phase: 'revert',
      code: 'SERVICE_START_FAILED',
      message: /not healthy/,
    },
  ],
  hostile: (value) => ({ name: 'hostile lab paths', inventory: inventory('lab', value, `/x/${value}`), node: value }),
});
