import { describe, expect, it } from 'vitest';
import { Inventory } from 'kube-runbook/internal/inventory/schema.js';
import type { LabInfo } from '../host/info.js';
import { labInventory } from './inventory.js';
import { resolveSettings } from '../host/settings.js';
import { serviceTarget } from 'kube-runbook/internal/nodes/services/index.js';

const info = (): LabInfo => ({
  instance: 't1',
  stateDir: '/h/t1',
  kubeconfig: '/h/t1/kubeconfig',
  context: 'lab-t1',
  inventoryFile: '/h/t1/inventory.yaml',
  apiserverUrl: 'https://10.213.3.2:6443',
  etcdUrl: 'http://10.213.3.2:2379',
  nodes: [
    { name: 'cp-1', netns: 'kr-t1-cp-1', ip: '10.213.3.2', roles: ['control-plane', 'etcd'] },
    { name: 'node-1', netns: 'kr-t1-node-1', ip: '10.213.3.3', zone: 'zone-a', roles: ['worker'] },
    { name: 'node-2', netns: 'kr-t1-node-2', ip: '10.213.3.4', zone: 'zone-b', roles: ['worker'] },
  ],
  settings: resolveSettings({ nodes: 2, zones: 2, grace: '10s', toleration: '20s', evictionRate: 0.5 }),
  phase: 'up',
  subnet: '10.213.3.0/24',
  bridge: 'kr-t1-br',
  chain: 'KR-t1-FWD',
  etcdCgroup: '/sys/fs/cgroup/blkio/kube-runbook-t1-etcd',
  etcdDataDir: '/h/t1/nodes/cp-1/etcd/data',
  createdAt: '2026-01-01T00:00:00Z',
});

describe('lab inventory', () => {
  it('is a valid lab inventory with netns transport, relative kubeconfig and the state dir', () => {
    const inv = Inventory.parse(labInventory(info()));
    expect(inv.spec).toMatchObject({
      layout: 'lab',
      transport: { type: 'netns' },
      kubeconfig: 'kubeconfig',
      context: 'lab-t1',
      lab: { stateDir: '/h/t1' },
    });
    expect(inv.spec.apiserver?.endpoints).toEqual(['10.213.3.2:6443']);
  });

  it("of a static-pod lab has kubeadm's layout in cp-1's kubeadm directory; the control plane is cp-1's static pods, kubelets stay lab services", () => {
    const inv = Inventory.parse(labInventory({ ...info(), settings: resolveSettings({ nodes: 2, realNodes: 1, staticPods: true }) }));
    expect(inv.spec).toMatchObject({
      layout: 'kubeadm',
      kubeadm: { dir: '/h/t1/nodes/cp-1/kubernetes', kubelet: 'lab' },
      transport: { type: 'netns' },
      lab: { stateDir: '/h/t1' },
    });
    const cp = inv.spec.nodes.find((n) => n.name === 'cp-1')!;
    expect(serviceTarget(inv, cp, 'kube-apiserver')).toMatchObject({
      manager: 'static-pod',
      manifest: '/h/t1/nodes/cp-1/kubernetes/manifests/kube-apiserver.yaml',
      parked: '/h/t1/nodes/cp-1/kubernetes/kube-runbook-parked/kube-apiserver.yaml',
    });
    expect(
      serviceTarget(
        inv,
        inv.spec.nodes.find((n) => n.name === 'node-1')!,
        'kubelet',
      ),
    ).toEqual({ manager: 'process', service: 'kubelet', dir: '/h/t1/nodes/node-1/kubelet' });
  });

  it("of kubeadm's lab has kubeadm's own /etc/kubernetes on each node: scripts enter the node's mount namespace, so a member's manifest is its own", () => {
    const members = ['cp-1', 'cp-2', 'cp-3'].map((name, i) => ({
      name,
      netns: `kr-t1-${name}`,
      ip: `10.213.3.${2 + i}`,
      roles: ['control-plane' as const, 'etcd' as const],
    }));
    const inv = Inventory.parse(
      labInventory({ ...info(), nodes: members, settings: resolveSettings({ nodes: 0, realNodes: 1, kubeadm: true, controlPlanes: 3 }) }),
    );
    expect(inv.spec).toMatchObject({
      layout: 'kubeadm',
      kubeadm: { dir: '/etc/kubernetes', kubelet: 'lab' },
      transport: { type: 'netns' },
    });
    const files = inv.spec.nodes.map((n) => n.mountns);
    expect(files.every((f) => f?.endsWith(`/t1/mnt/${f.split('/').pop()}`))).toBe(true);
    expect(new Set(files).size).toBe(3);
    for (const n of inv.spec.nodes)
      expect(serviceTarget(inv, n, 'kube-apiserver'), n.name).toMatchObject({
        manager: 'static-pod',
        manifest: '/etc/kubernetes/manifests/kube-apiserver.yaml',
      });
  });

  it("reaches a node whose PID 1 is systemd over ssh with the lab's key and known_hosts; its kubelet is kubeadm's unit, the others stay lab services", () => {
    const nodes = [
      { name: 'cp-1', netns: 'kr-t1-cp-1', ip: '10.213.3.2', roles: ['control-plane' as const, 'etcd' as const] },
      { name: 'rnode-1', netns: 'kr-t1-rnode-1', ip: '10.213.3.211', zone: 'zone-a', roles: ['worker' as const], real: true },
      {
        name: 'sd-1',
        netns: 'kr-t1-sd-1',
        ip: '10.213.3.252',
        zone: 'zone-a',
        roles: ['worker' as const],
        systemd: { dir: '/h/t1/nodes/sd-1/systemd' },
      },
    ];
    const doc = labInventory({ ...info(), nodes, settings: resolveSettings({ nodes: 0, realNodes: 1, kubeadm: true, systemdNodes: 1 }) });
    const inv = Inventory.parse(doc);
    const sd = inv.spec.nodes.find((n) => n.name === 'sd-1')!;
    expect(sd).toMatchObject({
      address: '10.213.3.252',
      transport: {
        type: 'ssh',
        user: 'root',
        identityFile: '/h/t1/ssh/id_ed25519',
        knownHostsFile: '/h/t1/ssh/known_hosts',
        strictHostKeyChecking: 'yes',
        ignoreUserConfig: true,
      },
    });
    expect(sd.netns).toBeUndefined();
    expect(sd.mountns).toBeUndefined();
    expect(serviceTarget(inv, sd, 'kubelet')).toMatchObject({ manager: 'systemd', unit: 'kubelet' });
    expect(sd.kubelet).toBe('systemd');
    const rnode = inv.spec.nodes.find((n) => n.name === 'rnode-1')!;
    expect(serviceTarget(inv, rnode, 'kubelet')).toEqual({ manager: 'process', service: 'kubelet', dir: '/h/t1/nodes/rnode-1/kubelet' });
    // reached through a node agent instead (real-nodes.test.ts), rnode-1's kubelet is still the lab's
    const agents = Inventory.parse({ ...doc, spec: { ...doc.spec, transport: { type: 'agent', enter: 'mount' } } });
    expect(
      serviceTarget(
        agents,
        agents.spec.nodes.find((n) => n.name === 'rnode-1')!,
        'kubelet',
      ),
    ).toMatchObject({ manager: 'process' });
    expect(inv.metadata.description).toContain('1 whose PID 1 is systemd, reached over ssh');
  });

  it('carries every controller setting the lab runs with', () => {
    const inv = Inventory.parse(labInventory(info()));
    expect(inv.spec.controller).toEqual({
      nodeMonitorGracePeriod: 10_000,
      nodeMonitorPeriod: 1000,
      nodeStartupGracePeriod: 20_000,
      nodeEvictionRate: 0.5,
      secondaryNodeEvictionRate: 0.01,
      unhealthyZoneThreshold: 0.55,
      largeClusterSizeThreshold: 50,
      defaultTolerationSeconds: 20,
      leaseDuration: 8000,
    });
  });

  it('lists cp-1 as control-plane and etcd, workers with zone and netns', () => {
    const nodes = Inventory.parse(labInventory(info())).spec.nodes;
    expect(nodes.map((n) => [n.name, n.roles.join('+'), n.zone ?? '-', n.netns])).toEqual([
      ['cp-1', 'control-plane+etcd', '-', 'kr-t1-cp-1'],
      ['node-1', 'worker', 'zone-a', 'kr-t1-node-1'],
      ['node-2', 'worker', 'zone-b', 'kr-t1-node-2'],
    ]);
  });

  it("points promql probes at the lab's Prometheus when it runs one, and has no spec.prometheus otherwise", () => {
    expect(Inventory.parse(labInventory(info())).spec.prometheus).toBeUndefined();
    const prometheus = { url: 'http://10.213.3.251:9090', node: 'prom', netns: 'kr-t1-prom', ip: '10.213.3.251' };
    const inv = Inventory.parse(labInventory({ ...info(), prometheus }));
    expect(inv.spec.prometheus).toEqual({ url: 'http://10.213.3.251:9090' });
    // Prometheus is no Kubernetes node
    expect(inv.spec.nodes.map((n) => n.name)).toEqual(['cp-1', 'node-1', 'node-2']);
  });

  it('lists every member of an HA lab, the load balancer, and the VIP as the apiserver endpoint', () => {
    const ha: LabInfo = {
      ...info(),
      apiserverUrl: 'https://10.213.3.250:6443',
      members: ['cp-1', 'cp-2', 'cp-3'].map((name, i) => ({
        name,
        apiserverUrl: `https://10.213.3.${i ? 202 + i : 2}:6443`,
        etcdUrl: `http://10.213.3.${i ? 202 + i : 2}:2379`,
        kubeconfig: `/h/t1/kubeconfig-${name}`,
      })),
      nodes: [
        { name: 'cp-1', netns: 'kr-t1-cp-1', ip: '10.213.3.2', roles: ['control-plane', 'etcd'] },
        { name: 'cp-2', netns: 'kr-t1-cp-2', ip: '10.213.3.203', roles: ['control-plane', 'etcd'] },
        { name: 'cp-3', netns: 'kr-t1-cp-3', ip: '10.213.3.204', roles: ['control-plane', 'etcd'] },
        { name: 'node-1', netns: 'kr-t1-node-1', ip: '10.213.3.3', zone: 'zone-a', roles: ['worker'] },
        { name: 'lb', netns: 'kr-t1-lb', ip: '10.213.3.250', roles: ['load-balancer'] },
      ],
    };
    const inv = Inventory.parse(labInventory(ha));
    expect(inv.spec.apiserver?.endpoints).toEqual(['10.213.3.250:6443']);
    expect(inv.spec.nodes.filter((n) => n.roles.includes('etcd')).map((n) => n.address)).toEqual([
      '10.213.3.2',
      '10.213.3.203',
      '10.213.3.204',
    ]);
    expect(inv.spec.nodes.find((n) => n.name === 'lb')?.roles).toEqual(['load-balancer']);
    expect(inv.metadata.description).toContain('3 members behind HAProxy');
  });
});
