import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runNodeScript, scratchNode, writeNodeKubeconfig } from '../testing/node-script.js';
import { eventually } from '../testing/wait.js';
import { serviceManager } from '../nodes/services/index.js';
import type { ServiceTarget } from '../nodes/services/types.js';
import { leasesFirstScript } from './parts/stop-service.js';
import { controlPlaneInventory } from '../testing/inventories.js';
import { actionTester } from '../testing/action-tester.js';
import action from './stop-controller-manager.js';
import { failingOn } from '../testing/fake-nodes.js';

const inventory = controlPlaneInventory;

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
        assert.deepEqual(r.prepared.target, {
          manager: 'systemd',
          service: 'kube-controller-manager',
          unit: 'k3s',
          healthUrl: 'https://127.0.0.1:6443/readyz',
        });
        assert.ok(r.ctx.log.lines.some((l) => l.level === 'warn' && /whole k3s server/.test(l.msg)));
      },
    },
    {
      name: 'lab: the kube-controller-manager service directory on the node',
      inventory: inventory('lab'),
      check(r) {
        assert.deepEqual(r.prepared.target, {
          manager: 'process',
          service: 'kube-controller-manager',
          dir: '/var/lib/kr-lab/nodes/cp-1/kube-controller-manager',
        });
      },
    },
  ],
  invalid: [
    {
      name: 'a status that is neither running nor stopped',
      inventory: inventory('lab'),
      handler: failingOn((script) => script.startsWith('# kube-runbook: process status'), 'status broken', { code: 2 }),
      phase: 'prepare',
      code: 'SERVICE_STATUS_FAILED',
    },
  ],
  hostile: (value) => ({ name: 'hostile lab paths', inventory: inventory('lab', value, `/x/${value}`), node: value }),
});

describe("stop-controller-manager's node-side revert starts it only once every kubelet heartbeats (the script runs for real, the apiserver is a stub curl)", () => {
  const { dir, svc, bin } = scratchNode('kr-kcm-node-', 'nodes', 'cp-1', 'kube-controller-manager');
  const leases = join(dir, 'leases.json');
  const started = join(svc, 'started');
  // the controller-manager's own kubeconfig may not list Leases (curl fails on it); the lab's admin one may
  writeNodeKubeconfig(join(svc, 'kubeconfig'), 'https://10.0.0.9:6443', 'kcm', 'kcm-token');
  writeNodeKubeconfig(join(dir, 'kubeconfig'), 'https://10.0.0.1:6443', 'admin', 'admin-token');
  writeFileSync(join(svc, 'start'), `#!/bin/sh\ndate +%s >>'${started}'\ntouch '${svc}/up'\n`, { mode: 0o755 });
  writeFileSync(join(svc, 'stop'), `#!/bin/sh\nrm -f '${svc}/up'\n`, { mode: 0o755 });
  writeFileSync(join(svc, 'status'), `#!/bin/sh\nif [ -f '${svc}/up' ]; then echo running; else echo stopped; exit 3; fi\n`, {
    mode: 0o755,
  });
  writeFileSync(join(svc, 'health'), `#!/bin/sh\n[ -f '${svc}/up' ]\n`, { mode: 0o755 });
  writeFileSync(
    join(bin, 'curl'),
    `#!/bin/sh\necho "$@" >>'${dir}/curl.args'\ncase "$*" in *10.0.0.9*) exit 22 ;; esac\n[ -f '${leases}' ] || exit 7\ncat '${leases}'\n`,
    { mode: 0o755 },
  );
  writeFileSync(join(bin, 'kubectl'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  const target: ServiceTarget = { manager: 'process', service: 'kube-controller-manager', dir: svc };
  const list = (renewed: Record<string, string>) =>
    JSON.stringify(
      {
        kind: 'LeaseList',
        apiVersion: 'coordination.k8s.io/v1',
        items: Object.entries(renewed).map(([name, renewTime]) => ({
          metadata: { name, namespace: 'kube-node-lease' },
          spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime },
        })),
      },
      null,
      2,
    );
  const run = (capS: number) =>
    runNodeScript(leasesFirstScript('stop-controller-manager', target, serviceManager(target).start(target, 2), capS, 1), bin);
  const until = eventually;
  const at = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000000Z`;

  it('waits while a node Lease is not renewed between two reads, naming the node, and starts it once all are', async () => {
    writeFileSync(leases, list({ 'node-1': at(1), 'node-2': at(1) }));
    const r = run(600);
    // node-1's kubelet heartbeats, node-2's is still stopped
    let beat = 1;
    const beating = setInterval(() => writeFileSync(leases, list({ 'node-1': at(++beat % 60), 'node-2': at(1) })), 200);
    expect(await until(() => r.out().includes('not starting it yet: 1 of 2 node Lease(s) not renewed since the last check: node-2'))).toBe(
      true,
    );
    expect(existsSync(started)).toBe(false);
    clearInterval(beating);
    // node-2's kubelet is back
    const both = setInterval(() => writeFileSync(leases, list({ 'node-1': at(++beat % 60), 'node-2': at(beat % 60) })), 200);
    const code = await r.exit;
    clearInterval(both);
    expect(code, r.out()).toBe(0);
    expect(r.out()).toContain('kubelets heartbeat (all 2 node Lease(s) renewed since the last check): starting it');
    expect(readFileSync(started, 'utf8').trim().split('\n')).toHaveLength(1);
    // the admin kubeconfig's token went in a header file, never on curl's command line
    expect(readFileSync(join(dir, 'curl.args'), 'utf8')).not.toContain('admin-token');
  });

  it('fails closed while the Leases cannot be read, and starts it anyway at the hard cap, saying so', async () => {
    rmSync(leases, { force: true });
    rmSync(started, { force: true });
    rmSync(join(svc, 'up'), { force: true });
    const r = run(2);
    expect(await r.exit).toBe(0);
    expect(r.out()).toContain('not starting it yet: the node Leases cannot be read');
    expect(r.out()).toMatch(/still the node Leases cannot be read .* after 2 s: starting it anyway \(the hard cap\)/);
    expect(existsSync(started)).toBe(true);
  });
});
