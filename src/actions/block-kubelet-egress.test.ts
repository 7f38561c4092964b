import assert from 'node:assert/strict';
import { describe, expect, it } from 'vitest';
import type { InventoryInput } from '../inventory/schema.js';
import { applyRules, egressRevert, nftRuleset, type EgressState } from './parts/egress-rules.js';
import { parseEndpoint } from './parts/egress-endpoints.js';
import { inventoryOf, scriptPurpose } from '../testing/inventories.js';
import { actionTester, shellSandbox } from '../testing/action-tester.js';
import type { FakeHandler } from '../testing/fake-nodes.js';
import action from './block-kubelet-egress.js';

const inventory = (o: { layout?: 'kubeadm' | 'k3s' | 'lab'; endpoints?: string[]; ssh?: boolean; node?: string } = {}): InventoryInput =>
  inventoryOf({
    layout: o.layout ?? 'kubeadm',
    ...(o.layout === 'lab' ? { lab: { stateDir: '/nonexistent/lab' } } : {}),
    ...(o.endpoints ? { apiserver: { endpoints: o.endpoints } } : {}),
    ...(o.ssh ? { transport: { type: 'ssh', port: 2222 } } : {}),
    nodes: [{ name: o.node ?? 'node-1', roles: ['worker'] }],
  });

/** The lab with its node reached through an agent (`runAsGroup`: the agent's own group). */
const agentLab = (runAsGroup?: number): InventoryInput => {
  const lab = inventory({ layout: 'lab', endpoints: ['10.99.0.1:6443'] });
  return { ...lab, spec: { ...lab.spec, transport: { type: 'agent', enter: 'mount', ...(runAsGroup ? { runAsGroup } : {}) } } };
};

/** A lab of `lab up --static-pods` (kubeadm's layout, lab kubelets); `systemd`: its node runs kubeadm's kubelet unit. */
const staticPodLab = (node: 'lab' | 'systemd'): InventoryInput => {
  const lab = inventory({ layout: 'lab', endpoints: ['10.99.0.1:6443'] });
  return {
    ...lab,
    spec: {
      ...lab.spec,
      layout: 'kubeadm',
      kubeadm: { kubelet: 'lab' },
      transport: { type: 'netns' },
      nodes: lab.spec.nodes.map((n) => ({ ...n, ...(node === 'systemd' ? { kubelet: 'systemd' as const } : {}) })),
    },
  };
};

const purpose = scriptPurpose;

/** A node: kubelet pid 1234; `detect` answers with these lines. */
const node =
  (detect: string[], pid = '1234'): FakeHandler =>
  ({ script }) => {
    const p = purpose(script);
    if (p.endsWith(' pid kubelet')) return pid ? { code: 0, stdout: `${pid}\n`, stderr: '' } : { code: 3, stdout: '', stderr: '' };
    if (p.endsWith('detect')) return { code: 0, stdout: detect.join('\n') + '\n', stderr: '' };
    return { code: 0, stdout: '', stderr: '' };
  };

const v2 = ['tool=iptables', 'root=yes', 'cgroup=/system.slice/kubelet.service', 'cgroupmatch=yes'];
const v1 = ['tool=iptables', 'root=yes'];

actionTester(action, {
  inventory: inventory({ endpoints: ['10.0.0.1:6443', 'api.example:443'], ssh: true }),
  valid: [
    {
      name: 'cgroup v2: only the kubelet cgroup, resolved hostnames, the ssh port kept',
      handler: node([...v2, 'addr=api.example 10.0.0.9', 'addr=api.example 10.0.0.1']),
      check(r) {
        const s = r.prepared as EgressState;
        assert.equal(s.tool, 'iptables');
        assert.match(s.chain, /^KR-EGRESS-[0-9A-F]{8}$/);
        assert.deepEqual(s.rules, [
          { ip: '10.0.0.1', port: 6443, v6: false },
          { ip: '10.0.0.9', port: 443, v6: false },
          { ip: '10.0.0.1', port: 443, v6: false },
        ]);
        assert.equal(s.cgroup, 'system.slice/kubelet.service');
        assert.equal(s.keepSourcePort, 2222);
        assert.equal(r.nodeSideRevert, egressRevert(s));
        const detect = r.scripts.find((x) => purpose(x.script).endsWith('detect'))!.script;
        assert.match(detect, /^set -- api\.example$/m, 'only host names are resolved on the node');
      },
    },
    {
      name: 'cgroup v1 (the lab): the whole node, no ssh rule for a netns node',
      inventory: inventory({ layout: 'lab', endpoints: ['10.99.0.1:6443'] }),
      handler: node(v1),
      check(r) {
        const s = r.prepared as EgressState;
        assert.equal(s.cgroup, null);
        assert.equal(s.keepSourcePort, null);
        assert.deepEqual(s.rules, [{ ip: '10.99.0.1', port: 6443, v6: false }]);
      },
    },
    {
      name: 'cgroup v1 on a lab of `lab up --static-pods` (kubeadm, lab kubelets): auto is the whole node namespace',
      inventory: staticPodLab('lab'),
      handler: node(v1),
      check(r) {
        const s = r.prepared as EgressState;
        assert.equal(s.cgroup, null);
        assert.deepEqual(s.rules, [{ ip: '10.99.0.1', port: 6443, v6: false }]);
      },
    },
    {
      name: "a lab node reached through an agent in its own group (runAsGroup): the whole node but the agent's group",
      inventory: agentLab(4242),
      handler: node(v1),
      check(r) {
        const s = r.prepared as EgressState;
        assert.equal(s.cgroup, null);
        assert.equal(s.keepGid, 4242);
        assert.match(r.scripts.find((x) => purpose(x.script).includes(' apply '))!.script, /--gid-owner 4242 -j RETURN/);
      },
    },
    {
      name: 'nftables where iptables is absent, IPv6 included (scope node said explicitly)',
      inventory: inventory({ endpoints: ['[fd00::1]:6443', '10.0.0.1:6443'] }),
      params: { scope: 'node' },
      handler: node(['tool=nft', 'root=yes']),
      check(r) {
        const s = r.prepared as EgressState;
        assert.equal(s.tool, 'nft');
        assert.match(nftRuleset(s), /ip6 daddr fd00::1 tcp dport 6443 counter drop/);
        assert.match(r.scripts.find((x) => purpose(x.script).includes(' apply '))!.script, /nft -f -/);
      },
    },
    {
      name: 'without endpoints in the inventory: the kubeconfig server and the kubernetes Endpoints',
      inventory: inventory(),
      params: { scope: 'node' },
      handler: node([...v1, 'addr=vip.example 10.0.0.100']),
      kube: {
        server: 'https://vip.example:6443',
        raw: async () => ({
          status: 200,
          body: JSON.stringify({
            subsets: [{ addresses: [{ ip: '10.0.0.2' }, { ip: '10.0.0.3' }], ports: [{ name: 'https', port: 6443 }] }],
          }),
        }),
      },
      check(r) {
        const s = r.prepared as EgressState;
        assert.deepEqual(
          s.rules.map((x) => `${x.ip}:${x.port}`),
          ['10.0.0.100:6443', '10.0.0.2:6443', '10.0.0.3:6443'],
        );
      },
    },
  ],
  invalid: [
    {
      name: 'a node without iptables or nft',
      handler: node(['tool=none', 'root=yes']),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /neither iptables nor nft/,
    },
    { name: 'not root', handler: node(['tool=iptables']), phase: 'preflight', message: /needs root/ },
    { name: 'no kubelet running', handler: node(v1, ''), phase: 'preflight', message: /kubelet is not running/ },
    {
      name: 'scope process on cgroup v1',
      params: { scope: 'process' },
      handler: node(v1),
      phase: 'preflight',
      message: /scope process needs cgroup v2/,
    },
    {
      name: 'scope auto where it would widen to the whole node (cgroup v1, kubeadm)',
      handler: node(v1),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /scope auto would widen to the whole node here .*say `scope: node` to accept that/,
    },
    {
      name: "scope auto on a kubeadm lab's node that runs kubeadm's kubelet unit (cgroup v1): it would widen to the whole node",
      inventory: staticPodLab('systemd'),
      handler: node(v1),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /scope auto would widen to the whole node here/,
    },
    {
      name: 'scope auto widened to a lab node whose agent has no group of its own: it would cut the agent off too',
      inventory: agentLab(),
      handler: node(v1),
      phase: 'preflight',
      code: 'PREFLIGHT_FAILED',
      message: /cut the node's agent off from the apiserver too .*spec\.transport\.runAsGroup/,
    },
    { name: 'a host the node cannot resolve', params: { scope: 'node' }, handler: node(v1), phase: 'prepare', code: 'ENDPOINT_UNRESOLVED' },
    {
      name: 'an endpoint without a port',
      params: { endpoints: ['10.0.0.1'] },
      handler: node(v1),
      phase: 'preflight',
      code: 'BAD_ENDPOINT',
    },
    {
      name: 'IPv6 endpoints without ip6tables',
      params: { endpoints: ['[fd00::1]:6443'], scope: 'node' },
      handler: node(v1),
      phase: 'prepare',
      code: 'NO_FIREWALL_TOOL',
    },
  ],
  hostile: (value) => ({
    name: 'hostile node name, node answers and endpoint',
    inventory: {
      ...inventory({ endpoints: ['10.0.0.1:6443'] }),
      spec: { ...inventory().spec, apiserver: { endpoints: ['10.0.0.1:6443'] }, nodes: [{ name: value }] },
    },
    node: value,
    handler: node(['tool=iptables', 'root=yes', `cgroup=/x${value}`, 'cgroupmatch=yes', `addr=10.0.0.1 ${value}`], value),
  }),
});

describe('block-kubelet-egress scripts', () => {
  const state: EgressState = {
    node: 'n',
    tool: 'iptables',
    chain: 'KR-EGRESS-0A1B2C3D',
    table: 'kube_runbook_egress_0a1b2c3d',
    rules: [
      { ip: '10.0.0.1', port: 6443, v6: false },
      { ip: 'fd00::1', port: 6443, v6: true },
    ],
    cgroup: 'system.slice/kubelet.service',
    keepSourcePort: 22,
  };

  it('apply creates our chain, lets ssh through, drops by cgroup and jumps to it from OUTPUT once', () => {
    const nothingYet = [{ args: '-C OUTPUT', code: 1 }, { code: 0 }];
    const sb = shellSandbox({ iptables: nothingYet, ip6tables: nothingYet });
    try {
      expect(sb.run(applyRules(state)).code).toBe(0);
      expect(sb.calls()).toContain('iptables -w -N KR-EGRESS-0A1B2C3D');
      expect(sb.calls()).toContain('iptables -w -A KR-EGRESS-0A1B2C3D -p tcp --sport 22 -j RETURN');
      expect(sb.calls()).toContain(
        'iptables -w -A KR-EGRESS-0A1B2C3D -p tcp -d 10.0.0.1 --dport 6443 -m cgroup --path system.slice/kubelet.service -j DROP',
      );
      expect(sb.calls()).toContain(
        'ip6tables -w -A KR-EGRESS-0A1B2C3D -p tcp -d fd00::1 --dport 6443 -m cgroup --path system.slice/kubelet.service -j DROP',
      );
      expect(sb.calls().filter((c) => c.includes('-I OUTPUT'))).toEqual([
        'iptables -w -I OUTPUT 1 -j KR-EGRESS-0A1B2C3D',
        'ip6tables -w -I OUTPUT 1 -j KR-EGRESS-0A1B2C3D',
      ]);
    } finally {
      sb.dispose();
    }
  });

  it('apply run again adds no second jump', () => {
    const sb = shellSandbox();
    try {
      expect(sb.run(applyRules(state)).code).toBe(0);
      expect(sb.calls().filter((c) => c.includes('-I OUTPUT'))).toEqual([]);
    } finally {
      sb.dispose();
    }
  });

  it('revert removes the jump, flushes and deletes the chain, and stops when nothing is left', () => {
    const sb = shellSandbox({ iptables: { code: 1 }, ip6tables: { code: 1 } }); // nothing to delete: bounded, no error
    try {
      const r = sb.run(egressRevert(state));
      expect(r.code).toBe(0);
      expect(sb.calls().filter((c) => c.includes('-X'))).toEqual([]);
    } finally {
      sb.dispose();
    }
  });

  it('parses the endpoint forms users write', () => {
    expect(parseEndpoint('10.0.0.1:6443')).toEqual({ host: '10.0.0.1', port: 6443 });
    expect(parseEndpoint('[fd00::1]:6443')).toEqual({ host: 'fd00::1', port: 6443 });
    expect(parseEndpoint('https://api.example')).toEqual({ host: 'api.example', port: 443 });
    for (const bad of ['api.example', 'a b:1', '$(x):1', '10.0.0.1:0', '10.0.0.1:70000']) expect(() => parseEndpoint(bad)).toThrow(/got/);
  });
});
