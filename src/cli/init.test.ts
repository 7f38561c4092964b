import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KrError } from '../core/errors.js';
import { checkInventory } from '../inventory/load.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import { defaultRegistry } from '../engine/registry.js';
import { checkRunbook } from '../runbook/load.js';
import { FakeClock } from '../testing/fake-clock.js';
import { discoverCluster } from './init-discover.js';
import { type FoundLab, type InitDeps, type InitFlags, runInit } from './init.js';
import type { Prompter } from './prompt.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kr-init-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const node = (name: string, o: { labels?: Record<string, string>; annotations?: Record<string, string>; ip?: string } = {}) => ({
  metadata: { name, labels: o.labels ?? {}, annotations: o.annotations ?? {} },
  status: { addresses: [{ type: 'Hostname', address: name }, ...(o.ip ? [{ type: 'InternalIP', address: o.ip }] : [])] },
});
const mirror = (component: string, nodeName: string, command: string[] = []) => ({
  metadata: { name: `${component}-${nodeName}`, labels: { component }, annotations: { 'kubernetes.io/config.mirror': 'x' } },
  spec: { nodeName, containers: [{ command }] },
});

/** A kubeadm cluster: cp-1 and two workers in two zones, the controller-manager run with eviction flags. */
const KUBEADM: Record<string, unknown> = {
  '/api/v1/nodes': {
    items: [
      node('worker-b', { labels: { 'topology.kubernetes.io/zone': 'b' }, ip: '10.0.0.12' }),
      node('worker-a', { labels: { 'topology.kubernetes.io/zone': 'a' }, ip: '10.0.0.11' }),
      node('cp-1', { labels: { 'node-role.kubernetes.io/control-plane': '', 'topology.kubernetes.io/zone': 'a' }, ip: '10.0.0.10' }),
    ],
  },
  '/api/v1/namespaces/kube-system/pods': {
    items: [
      mirror('kube-apiserver', 'cp-1'),
      mirror('etcd', 'cp-1'),
      mirror('kube-controller-manager', 'cp-1', [
        'kube-controller-manager',
        '--node-monitor-grace-period=20s',
        '--node-eviction-rate=0.2',
        '--secondary-node-eviction-rate=0.02',
        '--unhealthy-zone-threshold=0.6',
        '--large-cluster-size-threshold=30',
      ]),
      { metadata: { name: 'coredns-1', labels: {} }, spec: { nodeName: 'worker-a' } },
    ],
  },
  '/api/v1/namespaces/kube-system/configmaps/kubeadm-config': { data: {} },
};

function fakeKube(server: string, answers: Record<string, unknown> | Error): KubeAccess {
  return {
    contextName: 'x',
    server,
    async json<T>(path: string): Promise<T> {
      if (answers instanceof Error) throw answers;
      if (!(path in answers)) throw new ApiStatusError(404, `${path} not found`);
      return answers[path] as T;
    },
  } as KubeAccess;
}

/** Two contexts, lab (current) and prod, each with its own cluster. */
function deps(
  o: { clusters?: Record<string, Record<string, unknown> | Error>; prompter?: Prompter; lab?: FoundLab; kubeconfig?: boolean } = {},
) {
  const connected: string[] = [];
  const d: InitDeps = {
    env: {},
    clock: new FakeClock(0),
    prompter: o.prompter,
    contexts: () => (o.kubeconfig === false ? undefined : { names: ['lab', 'prod'], current: 'lab' }),
    connect: ({ context }) => {
      connected.push(context);
      return fakeKube(`https://${context}:6443`, o.clusters?.[context] ?? new Error('connect ECONNREFUSED'));
    },
    discover: discoverCluster,
    findLab: async (server) => (o.lab && server === 'https://lab:6443' ? o.lab : undefined),
  };
  return { deps: d, connected };
}

const init = (flags: Partial<InitFlags>, d: InitDeps) => runInit({ dir, ...flags }, d);
const inventoryText = () => readFileSync(join(dir, 'inventory.yaml'), 'utf8');
const runbookText = () => readFileSync(join(dir, 'runbook.yaml'), 'utf8');

describe('kube-runbook init', () => {
  it("takes the kubeconfig's current context and what its cluster says of itself; the files check as written", async () => {
    const { deps: d, connected } = deps({ clusters: { lab: KUBEADM } });
    const r = await init({}, d);
    expect(connected).toEqual(['lab']);
    expect(r.todos).toBe(0);
    const inv = await checkInventory(inventoryText(), 'inventory.yaml');
    expect(inv.ok, JSON.stringify(!inv.ok && inv.problems)).toBe(true);
    expect(parse(inventoryText()).spec).toMatchObject({
      layout: 'kubeadm',
      context: 'lab',
      controller: {
        nodeMonitorGracePeriod: '20s',
        nodeEvictionRate: 0.2,
        secondaryNodeEvictionRate: 0.02,
        unhealthyZoneThreshold: 0.6,
        largeClusterSizeThreshold: 30,
      },
      nodes: [
        { name: 'cp-1', address: '10.0.0.10', roles: ['control-plane', 'etcd'], zone: 'a' },
        { name: 'worker-a', address: '10.0.0.11', roles: ['worker'], zone: 'a' },
        { name: 'worker-b', address: '10.0.0.12', roles: ['worker'], zone: 'b' },
      ],
    });
    expect(inventoryText()).toContain('# found on context lab: layout kubeadm (kube-system/kubeadm-config), 3 nodes');
    const rb = await checkRunbook(runbookText(), 'runbook.yaml', defaultRegistry);
    expect(rb.ok).toBe(true);
    expect(parse(runbookText()).spec.safety.allowContexts).toEqual(['lab']);
  });

  it('--context prod picks prod; a context the kubeconfig lacks is bad input', async () => {
    const { deps: d, connected } = deps({ clusters: { prod: KUBEADM } });
    await init({ context: 'prod' }, d);
    expect(connected).toEqual(['prod']);
    expect(parse(inventoryText()).spec.context).toBe('prod');
    const e = await init({ context: 'staging', force: true }, d).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(KrError);
    expect([(e as KrError).exit, (e as KrError).message]).toEqual([
      2,
      '--context: no context "staging" in the kubeconfig (known: lab, prod)',
    ]);
  });

  it("k3s: from its node labels, the controller-manager's settings from a server's k3s.io/node-args", async () => {
    const args = JSON.stringify([
      'server',
      '--kube-controller-manager-arg',
      'node-monitor-grace-period=30s',
      '--kube-controller-manager-arg',
      'node-eviction-rate=0.5',
    ]);
    const k3s = {
      '/api/v1/nodes': {
        items: [
          node('server-1', {
            labels: {
              'node.kubernetes.io/instance-type': 'k3s',
              'node-role.kubernetes.io/control-plane': 'true',
              'node-role.kubernetes.io/etcd': 'true',
            },
            annotations: { 'k3s.io/node-args': args },
            ip: '192.0.2.1',
          }),
          node('agent-1', { labels: { 'node.kubernetes.io/instance-type': 'k3s' }, ip: '192.0.2.2' }),
        ],
      },
      '/api/v1/namespaces/kube-system/pods': { items: [] },
    };
    await init({}, deps({ clusters: { lab: k3s } }).deps);
    expect(parse(inventoryText()).spec).toMatchObject({
      layout: 'k3s',
      controller: { nodeMonitorGracePeriod: '30s', nodeEvictionRate: 0.5 },
      nodes: [
        { name: 'server-1', roles: ['control-plane', 'etcd'] },
        { name: 'agent-1', roles: ['worker'] },
      ],
    });
  });

  it('a context that does not answer: TODOs, each a problem at its line that no command gets past', async () => {
    const r = await init({ nodes: '1' }, deps().deps);
    expect(r.todos).toBe(5);
    expect(r.starter.notes).toEqual(['context lab (https://lab:6443) could not be read: connect ECONNREFUSED']);
    const inv = await checkInventory(inventoryText(), 'inventory.yaml');
    expect(inv.ok).toBe(false);
    const lines = inventoryText().split('\n');
    const problems = inv.ok ? [] : inv.problems;
    expect(problems.map((p) => p.path)).toEqual([
      'spec.layout',
      'spec.nodes[0].name',
      'spec.nodes[0].address',
      'spec.nodes[1].name',
      'spec.nodes[1].address',
    ]);
    for (const p of problems) {
      expect(p.message).toMatch(/^left to fill in: .* \(nothing runs while a TODO is left\)$/);
      expect(lines[p.line - 1]!.slice(p.col - 1)).toMatch(/^"TODO: /);
    }
    expect((await checkRunbook(runbookText(), 'runbook.yaml', defaultRegistry)).ok).toBe(true);
  });

  it("no kubeconfig: the context is a TODO, in the runbook's allowContexts too", async () => {
    await init({ layout: 'kubeadm' }, deps({ kubeconfig: false }).deps);
    const rb = await checkRunbook(runbookText(), 'runbook.yaml', defaultRegistry);
    expect(rb.ok ? [] : rb.problems.map((p) => `${p.line}:${p.col} ${p.path}`)).toEqual(['9:28 spec.safety.allowContexts[0]']);
    expect(parse(inventoryText()).spec.context).toBe('TODO: the kubeconfig context to run against');
  });

  it("a lab of this machine behind the context: the lab's nodes and settings, reached through their network namespaces", async () => {
    const lab: FoundLab = {
      instance: 'sf1',
      stateDir: '/state/lab/sf1',
      spec: {
        layout: 'lab',
        controller: { nodeMonitorGracePeriod: '8s' },
        apiserver: { endpoints: ['10.0.0.2:6443'] },
        nodes: [{ name: 'cp-1', address: '10.0.0.2', roles: ['control-plane', 'etcd'], netns: 'kr-sf1-cp-1' }],
      },
    };
    await init({}, deps({ lab }).deps);
    expect((await checkInventory(inventoryText(), 'inventory.yaml')).ok).toBe(true);
    expect(parse(inventoryText()).spec).toEqual({
      layout: 'lab',
      context: 'lab',
      transport: { type: 'netns' },
      lab: { stateDir: '/state/lab/sf1' },
      apiserver: { endpoints: ['10.0.0.2:6443'] },
      controller: { nodeMonitorGracePeriod: '8s' },
      nodes: [{ name: 'cp-1', address: '10.0.0.2', roles: ['control-plane', 'etcd'], netns: 'kr-sf1-cp-1' }],
    });
  });

  it('a lab whose cluster has nodes it did not make (kubeadm join on a machine of their own): those reached over ssh', async () => {
    const lab: FoundLab = {
      instance: 'sf1',
      stateDir: '/state/lab/sf1',
      spec: {
        layout: 'kubeadm',
        nodes: [{ name: 'cp-1', address: '10.0.0.10', roles: ['control-plane', 'etcd'], netns: 'kr-sf1-cp-1' }],
      },
    };
    await init({}, deps({ lab, clusters: { lab: KUBEADM } }).deps);
    expect((await checkInventory(inventoryText(), 'inventory.yaml')).ok).toBe(true);
    const spec = parse(inventoryText()).spec;
    expect(spec.transport).toEqual({ type: 'netns' });
    expect(spec.nodes).toEqual([
      { name: 'cp-1', address: '10.0.0.10', roles: ['control-plane', 'etcd'], netns: 'kr-sf1-cp-1' },
      { name: 'worker-a', address: '10.0.0.11', roles: ['worker'], zone: 'a', transport: { type: 'ssh', user: 'root' } },
      { name: 'worker-b', address: '10.0.0.12', roles: ['worker'], zone: 'b', transport: { type: 'ssh', user: 'root' } },
    ]);
    expect(inventoryText()).toContain('# worker-a, worker-b: in the cluster but not made by lab sf1; reached over ssh');
  });

  it("a kubeadm lab: each node's mount namespace, and a node the lab reaches over ssh with its key and known_hosts, as the lab wrote them", async () => {
    const ssh = {
      type: 'ssh',
      user: 'root',
      identityFile: '/state/lab/sf1/ssh/id_ed25519',
      knownHostsFile: '/state/lab/sf1/ssh/known_hosts',
    };
    const nodes = [
      { name: 'cp-1', address: '10.0.0.10', roles: ['control-plane', 'etcd'], netns: 'kr-sf1-cp-1', mountns: '/run/kr/sf1/mnt/cp-1' },
      {
        name: 'sd-1',
        address: '10.0.0.252',
        roles: ['worker'],
        zone: 'zone-a',
        transport: { ...ssh, ignoreUserConfig: true },
        kubelet: 'systemd',
      },
    ];
    const lab: FoundLab = {
      instance: 'sf1',
      stateDir: '/state/lab/sf1',
      spec: {
        layout: 'kubeadm',
        kubeadm: { kubelet: 'lab' },
        nodes,
      },
    };
    await init({}, deps({ lab }).deps);
    expect((await checkInventory(inventoryText(), 'inventory.yaml')).ok).toBe(true);
    // written as the lab's inventory has them: mount namespace, own transport, kubelet
    expect(parse(inventoryText()).spec.nodes).toEqual(nodes);
  });

  it('on a terminal: offers the contexts, and asks for what the cluster did not say', async () => {
    const said: string[] = [];
    const answers = ['2', 'k3s', 'server-1', 'agent-1, agent-2'];
    const prompter: Prompter = {
      async ask(question, o) {
        said.push(question);
        const v = o.parse(answers.shift() || o.fallback || '');
        if (v instanceof Error) throw v;
        return v;
      },
      say: (t) => said.push(t),
      close() {},
    };
    await init({}, deps({ prompter }).deps);
    expect(said.slice(0, 3)).toEqual(['kubeconfig contexts:', '  1) lab (current)', '  2) prod']);
    expect(parse(inventoryText()).spec).toMatchObject({
      layout: 'k3s',
      context: 'prod',
      nodes: [
        { name: 'server-1', roles: ['control-plane', 'etcd'] },
        { name: 'agent-1', roles: ['worker'] },
        { name: 'agent-2', roles: ['worker'] },
      ],
    });
    expect((await checkInventory(inventoryText(), 'inventory.yaml')).ok).toBe(true);
  });
});
