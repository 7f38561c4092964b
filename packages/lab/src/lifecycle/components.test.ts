import { describe, expect, it } from 'vitest';
import { isKrError } from 'kube-runbook/internal/core/errors.js';
import type { LabBinariesInfo } from '../host/info.js';
import type { LabPki } from '../host/pki.js';
import { resolveSettings } from '../host/settings.js';
import {
  apiserverService,
  apiSocketOf,
  controllerManagerService,
  etcdService,
  kubeletService,
  kubeletSimsService,
  schedulerService,
  type ComponentContext,
} from './components.js';
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
  etcdCgroup: { dir: '/sys/fs/cgroup/kube-runbook-sa-etcd', version: 2, name: 'kube-runbook-sa-etcd', options: '' },
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

describe("a control-plane member's components", () => {
  const cpu = (s: string) => ({
    dir: `/sys/fs/cgroup/cpu,cpuacct/kube-runbook-sa-cp-1/${s}`,
    version: 1 as const,
    name: `kube-runbook-sa-cp-1/${s}`,
    options: 'cpu,cpuacct',
  });
  const c: ComponentContext = {
    ...ctx('/var/lib/lab'),
    pki: { cert: (n: string) => `/pki/${n}.crt`, key: (n: string) => `/pki/${n}.key` } as LabPki,
    etcdCgroup: { dir: '/sys/fs/cgroup/blkio/kube-runbook-sa-etcd', version: 1, name: 'kube-runbook-sa-etcd', options: 'blkio' },
    cpuCgroups: new Map(['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'].map((s) => [s, cpu(s)])),
  };

  it('each joins its own cpu cgroup, etcd its blkio one too; from inside ip netns exec they mount the hierarchy themselves', () => {
    expect(apiserverService(c).joins).toEqual([cpu('kube-apiserver')]);
    expect(controllerManagerService(c).joins).toEqual([cpu('kube-controller-manager')]);
    expect(schedulerService(c).joins).toEqual([cpu('kube-scheduler')]);
    expect(etcdService(c).joins).toEqual([c.etcdCgroup, cpu('etcd')]);
    const run = serviceScripts(apiserverService(c)).run;
    expect(run).toContain("grep -q ':cpu,cpuacct:/kube-runbook-sa-cp-1/kube-apiserver$' /proc/$$/cgroup");
    expect(run).toContain('mount -t cgroup -o cpu,cpuacct none "$m"');
    // joined before the script enters the node's namespace
    expect(run.indexOf('kube-apiserver/cgroup.procs')).toBeLessThan(run.indexOf('ip netns exec'));
  });

  it("a simulated node's forwarder joins none of them", () => {
    expect(kubeletService(c, 'node-1', 'kr-sa-node-1', { host: '10.213.0.2', port: 6443 }).joins).toEqual([]);
  });
});
