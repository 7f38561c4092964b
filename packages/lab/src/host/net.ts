import { join } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { mustSh, run } from './host.js';
import { withLock } from './lock.js';
import { machineRunDir, type LabNames } from './paths.js';

/**
 * The lab's network: one bridge per instance on a /24 of 10.213.0.0/16 that nothing else on this machine uses,
 * one network namespace per node with a veth on the bridge, and a filter chain that keeps the lab's traffic on
 * its bridge. The host reaches every namespace through the bridge's address.
 */
export interface LabNetPlan {
  subnet: string;
  gateway: string;
  nodes: { name: string; netns: string; veth: string; ip: string }[];
}

export const SUBNET_BASE = '10.213';

/** The load balancer's address (the VIP of an HA lab). */
const LB_HOST = 250;
/** Prometheus's address (`lab up --prometheus`). */
const PROMETHEUS_HOST = 251;
/** A node whose PID 1 is systemd, joined by kubeadm: sd-1 .252 to sd-3 .254. */
const SYSTEMD_NODE_HOST = 251;

/**
 * Node addresses: the bridge is .1, cp-1 .2, node-i .(2+i) (node-200 is .202), the other control-plane members
 * cp-N .(201+N) (cp-2 .203 ... cp-9 .210), the load balancer `lb` .250, Prometheus `prom` .251. A one-member
 * lab keeps the addresses it always had. Real nodes rnode-N are .(210+N) (rnode-1 .211 ... rnode-39 .249); nodes
 * whose PID 1 is systemd sd-N .(251+N) (sd-1 .252 ... sd-3 .254).
 */
export function nodeIp(third: number, node: string): string {
  if (node === 'lb') return `${SUBNET_BASE}.${third}.${LB_HOST}`;
  if (node === 'prom') return `${SUBNET_BASE}.${third}.${PROMETHEUS_HOST}`;
  const sd = /^sd-(\d+)$/.exec(node);
  if (sd) {
    const r = Number(sd[1]);
    if (r < 1 || r > 3) throw new KrError('LAB_BAD_NODE', `systemd node ${node} is not sd-1 to sd-3`);
    return `${SUBNET_BASE}.${third}.${SYSTEMD_NODE_HOST + r}`;
  }
  const real = /^rnode-(\d+)$/.exec(node);
  if (real) {
    const r = Number(real[1]);
    if (r < 1 || r > 39) throw new KrError('LAB_BAD_NODE', `real node ${node} is not rnode-1 to rnode-39`);
    return `${SUBNET_BASE}.${third}.${210 + r}`;
  }
  const m = /^(cp|node)-(\d+)$/.exec(node);
  if (!m) throw new KrError('LAB_BAD_NODE', `no address for node ${node}`);
  const n = Number(m[2]);
  if (m[1] === 'cp' && (n < 1 || n > 9)) throw new KrError('LAB_BAD_NODE', `control-plane member ${node} is not cp-1 to cp-9`);
  const host = m[1] === 'cp' ? (n === 1 ? 2 : 201 + n) : 2 + n;
  if (m[1] === 'node' && host > 202) throw new KrError('LAB_BAD_NODE', `node ${node} does not fit in a /24`);
  if (host > 254) throw new KrError('LAB_BAD_NODE', `node ${node} does not fit in a /24`);
  return `${SUBNET_BASE}.${third}.${host}`;
}

/** Third octets of 10.213.x.0/24 already in use on this machine (addresses or routes). */
export function usedThirdOctets(addrAndRoutes: string): Set<number> {
  const used = new Set<number>();
  for (const m of addrAndRoutes.matchAll(/\b10\.213\.(\d{1,3})\./g)) used.add(Number(m[1]));
  if (/\b10\.213\.0\.0\/16\b|\b10\.0\.0\.0\/8\b/.test(addrAndRoutes)) for (let i = 0; i < 256; i++) used.add(i);
  return used;
}

/**
 * Chooses a free /24 and makes the bridge with its address, under a machine-wide lock so that two instances
 * starting at once never pick the same subnet. Returns the third octet.
 */
export async function makeBridge(names: LabNames, runDir = machineRunDir()): Promise<number> {
  return withLock(join(runDir, 'subnet.lock'), async () => {
    const seen = (await run('ip', ['-4', '-o', 'addr'])).stdout + (await run('ip', ['-4', 'route', 'show', 'table', 'all'])).stdout;
    const used = usedThirdOctets(seen);
    const third = [...Array(256).keys()].find((i) => !used.has(i));
    if (third === undefined) throw new KrError('LAB_NO_SUBNET', 'every 10.213.x.0/24 is in use on this machine');
    await mustSh(
      'LAB_NET_FAILED',
      `making bridge ${names.bridge}`,
      [
        'set -e',
        `ip link add ${shq(names.bridge)} type bridge`,
        `ip addr add ${SUBNET_BASE}.${third}.1/24 dev ${shq(names.bridge)}`,
        `ip link set ${shq(names.bridge)} up`,
      ].join('\n'),
    );
    return third;
  });
}

/** Makes each node's namespace and its veth on the bridge (`eth0` in the node, its address a /24 of the bridge's). */
async function addNodesNet(names: LabNames, nodes: LabNetPlan['nodes']): Promise<void> {
  const lines = ['set -e'];
  for (const n of nodes) {
    const ns = shq(n.netns);
    lines.push(
      `ip netns add ${ns}`,
      `ip -n ${ns} link set lo up`,
      `ip link add ${shq(n.veth)} type veth peer name eth0 netns ${ns}`,
      `ip link set ${shq(n.veth)} master ${shq(names.bridge)} up`,
      `ip -n ${ns} addr add ${n.ip}/24 dev eth0`,
      `ip -n ${ns} link set eth0 up`,
    );
  }
  await mustSh('LAB_NET_FAILED', 'making the node namespaces', lines.join('\n'));
}

/** Makes each node's namespace and veth, and the chain that keeps traffic on the bridge. */
export async function makeNodesNet(names: LabNames, plan: LabNetPlan): Promise<void> {
  await addNodesNet(names, plan.nodes);
  const br = shq(names.bridge);
  const chain = shq(names.chain);
  await mustSh(
    'LAB_NET_FAILED',
    `making iptables chain ${names.chain}`,
    [
      'set -e',
      `iptables -w -N ${chain}`,
      `iptables -w -A ${chain} -i ${br} -o ${br} -j ACCEPT`,
      `iptables -w -A ${chain} -j DROP`,
      `iptables -w -I FORWARD 1 -i ${br} -j ${chain}`,
      `iptables -w -I FORWARD 1 -o ${br} -j ${chain}`,
    ].join('\n'),
  );
}

/** Network namespaces whose name starts with `prefix`. */
export async function listNetns(prefix: string): Promise<string[]> {
  const r = await run('ip', ['netns', 'list']);
  return r.stdout
    .split('\n')
    .map((l) => l.split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(prefix));
}

/** Links on the host whose name starts with `prefix`. */
export async function listLinks(prefix: string): Promise<string[]> {
  const r = await run('ip', ['-o', 'link', 'show']);
  return r.stdout
    .split('\n')
    .map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1] ?? '')
    .filter((n) => n.startsWith(prefix));
}

/** iptables chains (filter table) whose name starts with `prefix`. */
export async function listChains(prefix: string): Promise<string[]> {
  const r = await run('iptables', ['-w', '-S']);
  return r.stdout
    .split('\n')
    .map((l) => /^-N (\S+)$/.exec(l)?.[1] ?? '')
    .filter((n) => n.startsWith(prefix));
}

/** Pids in a network namespace. */
export async function netnsPids(netns: string): Promise<number[]> {
  const r = await run('ip', ['netns', 'pids', netns]);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** Removes the chains (and every rule jumping to them), the namespaces and the links; quiet about what is not there. */
export async function removeNet(names: LabNames): Promise<void> {
  for (const chain of await listChains(names.chainPrefix)) {
    const rules = (await run('iptables', ['-w', '-S'])).stdout.split('\n').filter((l) => l.startsWith('-A ') && l.endsWith(`-j ${chain}`));
    for (const rule of rules) await run('iptables', ['-w', '-D', ...rule.slice(3).split(/\s+/)]);
    await run('iptables', ['-w', '-F', chain]);
    await run('iptables', ['-w', '-X', chain]);
  }
  for (const ns of await listNetns(names.prefix)) await run('ip', ['netns', 'del', ns]);
  for (const link of await listLinks(names.prefix)) await run('ip', ['link', 'del', link]);
  const left = [...(await listNetns(names.prefix)), ...(await listLinks(names.prefix)), ...(await listChains(names.chainPrefix))];
  if (left.length) throw new KrError('LAB_DOWN_INCOMPLETE', `could not remove ${left.join(', ')}`);
}
