import { describe, expect, it } from 'vitest';
import { isKrError } from '../../core/errors.js';
import type { LabBinariesInfo } from '../host/info.js';
import type { LabPki } from '../host/pki.js';
import { resolveSettings } from '../host/settings.js';
import { apiSocketOf, kubeletService, kubeletSimsService, type ComponentContext } from './components.js';
import { serviceScripts } from './services.js';

const ctx = (stateDir: string): ComponentContext => ({
  instance: 'sa',
  cpNode: 'cp-1',
  cpNetns: 'kr-sa-cp-1',
  cpIp: '10.213.0.2',
  members: [{ name: 'cp-1', ip: '10.213.0.2' }],
  serviceDir: (node, service) => `${stateDir}/nodes/${node}/${service}`,
  pki: {} as LabPki,
  bin: {} as LabBinariesInfo,
  settings: resolveSettings({}),
  etcdCgroup: { dir: '/sys/fs/cgroup/kube-runbook-sa-etcd', version: 2, name: 'kube-runbook-sa-etcd' },
});

describe('simulated node services', () => {
  it("a node's kubelet is its forwarder in its namespace, whose stop takes its connections down too", () => {
    const svc = kubeletService(ctx('/var/lib/lab'), 'node-3', 'kr-sa-node-3', { host: '10.213.0.2', port: 6443 });
    expect(svc.netns).toBe('kr-sa-node-3');
    expect(svc.command).toEqual(['socat', `UNIX-LISTEN:${apiSocketOf(svc.dir)},fork,unlink-early,mode=600`, 'TCP:10.213.0.2:6443']);
    expect(apiSocketOf(svc.dir)).toBe('/var/lib/lab/nodes/node-3/kubelet/api.sock');
    const scripts = serviceScripts(svc);
    expect(scripts.run).toContain('ip netns exec kr-sa-node-3');
    expect(scripts.stop).toContain('kill -TERM -"$pid"');
    // healthy only while the node's simulator keeps renewing
    expect(scripts.health).toContain('/var/lib/lab/nodes/node-3/kubelet/heartbeat');
  });

  it('refuses a state directory socat cannot take as an address, naming it', () => {
    for (const bad of ['/var/lib/a:b', '/var/lib/a,b', '/var/lib/my lab']) {
      let err: unknown;
      try {
        kubeletService(ctx(bad), 'node-1', 'kr-sa-node-1', { host: '10.213.0.2', port: 6443 });
      } catch (e) {
        err = e;
      }
      expect(isKrError(err) && err.code).toBe('LAB_BAD_STATE_DIR');
      expect(isKrError(err) && err.message).toContain(bad);
    }
  });

  it("a group of simulators runs in the host's namespace, names its directory and is started again when it dies", () => {
    const svc = kubeletSimsService(
      ctx('/var/lib/lab'),
      '/var/lib/lab/kubelet-sims/group-2',
      'group-2',
      '/usr/bin/node',
      '/opt/kr/dist/lab/sim/kubelet-sim.js',
    );
    expect(svc.netns).toBeUndefined();
    expect(svc.restart).toBe(true);
    expect(svc.command).toEqual([
      '/usr/bin/node',
      '/opt/kr/dist/lab/sim/kubelet-sim.js',
      '--group=/var/lib/lab/kubelet-sims/group-2/group.json',
    ]);
    expect(serviceScripts(svc).run).not.toContain('netns');
  });
});
