import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import type { ActionCtx } from '../contract/context.js';
import { KrError, quote } from '../core/errors.js';
import { describeTarget, runOnNode, serviceManager, serviceTarget, targetNode } from '../nodes/services/index.js';
import { script } from '../nodes/services/script.js';
import { STATUS_STOPPED } from '../nodes/services/types.js';
import { shq } from '../core/shell.js';
import { applyRules, egressRevert, type EgressRule, type EgressState } from './parts/egress-rules.js';
import { apiserverEndpoints } from './parts/egress-endpoints.js';
import { scriptFault } from './parts/script-fault.js';
import { defineAction } from '../contract/action.js';
import { labKubelet } from '../inventory/schema.js';

const Params = z.strictObject({
  endpoints: z.array(z.string().min(1)).min(1).optional().meta({
    description:
      "host:port of the apiservers to cut off; else the inventory's spec.apiserver.endpoints, else the kubeconfig's server and the `kubernetes` Endpoints",
  }),
  scope: z.enum(['auto', 'process', 'node']).default('auto').meta({
    description:
      "process: only the kubelet's own traffic (its cgroup v2); node: all of the node's traffic to those endpoints; auto: process, and refused at preflight where that would widen to the whole node (on the lab, whose node namespace holds only the kubelet, node)",
  }),
});

/** What the node says in prepare (read-only). */
interface Detected {
  tool: 'iptables' | 'nft' | 'none';
  ip6: boolean;
  root: boolean;
  cgroup: string | null;
  cgroupMatch: boolean;
  addrs: Map<string, string[]>;
}

const CGROUP_PATH = /^\/[A-Za-z0-9_.:@\\/-]+$/;

function detectScript(hosts: string[], pid: string | null): string {
  return script(
    'block-kubelet-egress detect',
    { pid: pid ?? '' },
    `set -- ${hosts.map(shq).join(' ')}`,
    'if command -v iptables >/dev/null 2>&1; then echo tool=iptables; elif command -v nft >/dev/null 2>&1; then echo tool=nft; else echo tool=none; fi',
    'command -v ip6tables >/dev/null 2>&1 && echo ip6=yes',
    '[ "$(id -u 2>/dev/null)" = 0 ] && echo root=yes',
    'if [ -n "$pid" ] && [ -r "/proc/$pid/cgroup" ] && [ "$(grep -vc "^0::" "/proc/$pid/cgroup")" = 0 ]; then',
    '  printf "cgroup=%s\\n" "$(sed -n "s/^0:://p" "/proc/$pid/cgroup")"',
    'fi',
    'if command -v iptables >/dev/null 2>&1; then',
    '  iptables -m cgroup --help 2>/dev/null | grep -q -- "--path" && echo cgroupmatch=yes',
    'elif command -v nft >/dev/null 2>&1; then',
    '  printf "%s\\n" "table inet kube_runbook_probe { chain c { socket cgroupv2 level 1 \\"init.scope\\" accept; }; }" | nft -c -f - >/dev/null 2>&1 && echo cgroupmatch=yes',
    'fi',
    'for h in "$@"; do',
    '  getent ahosts "$h" 2>/dev/null | while read -r a _; do printf "addr=%s %s\\n" "$h" "$a"; done',
    'done',
    'exit 0',
  );
}

function parseDetected(stdout: string): Detected {
  const d: Detected = { tool: 'none', ip6: false, root: false, cgroup: null, cgroupMatch: false, addrs: new Map() };
  for (const line of stdout.split('\n')) {
    const [k, v = ''] = [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)];
    if (k === 'tool' && (v === 'iptables' || v === 'nft')) d.tool = v;
    else if (k === 'ip6') d.ip6 = v === 'yes';
    else if (k === 'root') d.root = v === 'yes';
    else if (k === 'cgroupmatch') d.cgroupMatch = v === 'yes';
    else if (k === 'cgroup' && CGROUP_PATH.test(v) && v !== '/') d.cgroup = v;
    else if (k === 'addr') {
      const [host = '', ip = ''] = v.split(' ');
      if (isIP(ip)) d.addrs.set(host, [...new Set([...(d.addrs.get(host) ?? []), ip])]);
    }
  }
  return d;
}

async function detect(ctx: ActionCtx, endpoints: { host: string; port: number }[]) {
  const node = targetNode(ctx, 'block-kubelet-egress');
  const kubelet = serviceTarget(ctx.inventory, node, 'kubelet');
  const p = await runOnNode(ctx, node.name, serviceManager(kubelet).pid(kubelet), {
    code: 'KUBELET_LOOKUP_FAILED',
    message: `block-kubelet-egress: cannot look for the kubelet (${describeTarget(kubelet)})`,
    timeoutMs: 30_000,
    okCodes: [STATUS_STOPPED],
  });
  const pid = /^\d+$/.test(p.stdout.trim()) ? p.stdout.trim() : null;
  const hosts = [...new Set(endpoints.map((e) => e.host).filter((h) => !isIP(h)))];
  const r = await runOnNode(ctx, node.name, detectScript(hosts, pid), {
    code: 'PREFLIGHT_FAILED',
    message: 'block-kubelet-egress: cannot inspect the node',
    timeoutMs: 30_000,
  });
  return { node, pid, d: parseDetected(r.stdout) };
}

/** Drops the kubelet's packets to the apiservers, in a chain (or nft table) of our own; never the ssh connection. */
export default defineAction({
  meta: {
    access: [
      {
        apiGroup: '',
        resource: 'endpoints',
        verbs: ['get'],
        namespace: 'default',
        why: "reads the apiserver's addresses (Endpoints default/kubernetes) when `endpoints` is not given",
      },
    ],
    id: 'block-kubelet-egress',
    summary: "Drop the kubelet's traffic to the apiservers on nodes, in a firewall chain of our own.",
    description:
      'On each selected node (workers by default), adds a chain of our own that drops TCP packets to the apiserver endpoints ' +
      "(the `endpoints` param, else the inventory's `spec.apiserver.endpoints`, else the kubeconfig's server and the addresses " +
      'of the `kubernetes` Endpoints), with iptables (and ip6tables for IPv6) or, where iptables is absent, an nftables table. ' +
      "Where the node runs cgroup v2 and the kubelet has a cgroup of its own, only the kubelet's sockets match (scope `process`); " +
      'otherwise every packet of the node to those endpoints does (scope `node`). Packets from the ssh port are let through first, so ' +
      "the transport's own connection is never cut. The node's Lease stops being renewed while the chain's counters rise.",
    params: Params,
    targets: 'nodes',
    defaultNodes: 'workers',
    kind: 'fault',
    layouts: {
      kubeadm:
        'matches the cgroup of `kubelet.service` (`-m cgroup --path system.slice/kubelet.service`) on cgroup v2 nodes, all node traffic on cgroup v1',
      k3s: "matches the cgroup of `k3s-agent.service` (the kubelet and the agent's apiserver proxy are one process) on cgroup v2, all node traffic otherwise",
      lab:
        "each lab node is a network namespace (also under `lab up --static-pods`): the chain goes into that namespace's OUTPUT, so it cuts exactly that node's kubelet; " +
        'under scope auto the node agents keep the apiserver when they run in a group of their own (`spec.transport.runAsGroup`)',
    },
    undo: 'removes the jump from OUTPUT and deletes the chain (or deletes the nftables table); the node-side dead-man runs the same script',
    // scope node drops every process's traffic to the apiservers, a node agent's too; auto keeps to the kubelet's
    // cgroup, or, on the lab, where it widens to the node namespace, lets the agents' own group (runAsGroup) through
    isolatesNode: (params) => (params.scope === 'node' ? 'yes' : 'no'),
  },

  async preflight(ctx, params) {
    const endpoints = await apiserverEndpoints(ctx, params.endpoints);
    const { node, pid, d } = await detect(ctx, endpoints);
    const fail = (why: string) => {
      throw new KrError('PREFLIGHT_FAILED', `block-kubelet-egress on ${node.name}: ${why}`);
    };
    if (d.tool === 'none') fail('neither iptables nor nft found');
    if (!d.root) fail('changing the firewall needs root (run as root, or set transport.sudo in the inventory)');
    if (!pid) fail('the kubelet is not running there');
    if (params.scope === 'process' && !(d.cgroup && d.cgroupMatch))
      fail("scope process needs cgroup v2 and the firewall's cgroup match; use scope node or auto");
    // a lab node's namespace holds only its kubelet (and its runtime): there, the node's traffic is the kubelet's
    if (params.scope === 'auto' && !(d.cgroup && d.cgroupMatch) && !labKubelet(ctx.inventory, node))
      fail(
        "scope auto would widen to the whole node here (no cgroup v2 match for the kubelet): every process's traffic to the apiservers " +
          "would be dropped, not only the kubelet's; say `scope: node` to accept that, or run it where the kubelet has a cgroup v2 of its own",
      );
    const transport = node.transport ?? ctx.inventory.spec.transport;
    // widened to the node, only the agent's own group keeps the apiserver: without one, the agent is cut off too
    if (params.scope === 'auto' && !(d.cgroup && d.cgroupMatch) && transport.type === 'agent' && transport.runAsGroup === undefined)
      fail(
        "scope auto widens to the whole node here and would cut the node's agent off from the apiserver too (it reverts only by its dead-man then); " +
          'give the agent a group of its own to let through (spec.transport.runAsGroup), or say `scope: node` to accept that',
      );
  },

  async prepare(ctx, params): Promise<EgressState> {
    const endpoints = await apiserverEndpoints(ctx, params.endpoints);
    const { node, d } = await detect(ctx, endpoints);
    if (d.tool === 'none') throw new KrError('NO_FIREWALL_TOOL', `block-kubelet-egress: neither iptables nor nft on ${node.name}`);
    const rules: EgressRule[] = [];
    for (const e of endpoints) {
      const ips = isIP(e.host) ? [e.host] : (d.addrs.get(e.host) ?? []);
      if (!ips.length)
        throw new KrError('ENDPOINT_UNRESOLVED', `block-kubelet-egress: ${node.name} cannot resolve the apiserver host ${quote(e.host)}`);
      for (const ip of ips) if (!rules.some((r) => r.ip === ip && r.port === e.port)) rules.push({ ip, port: e.port, v6: isIP(ip) === 6 });
    }
    if (rules.some((r) => r.v6) && d.tool === 'iptables' && !d.ip6)
      throw new KrError('NO_FIREWALL_TOOL', `block-kubelet-egress: ${node.name} has IPv6 apiserver addresses but no ip6tables`);
    const processScope = params.scope !== 'node' && d.cgroup !== null && d.cgroupMatch;
    if (params.scope === 'process' && !processScope)
      throw new KrError('NO_PROCESS_SCOPE', `block-kubelet-egress: cannot match the kubelet's cgroup on ${node.name}`);
    if (!processScope && (node.transport ?? ctx.inventory.spec.transport).type === 'local')
      ctx.log.warn(
        `block-kubelet-egress on ${node.name}: scope node on the executor's own machine also cuts the executor's view of those apiservers`,
      );
    const transport = node.transport ?? ctx.inventory.spec.transport;
    const hash = createHash('sha256').update(`${ctx.runId}/${node.name}`).digest('hex').slice(0, 8);
    return {
      node: node.name,
      tool: d.tool,
      chain: `KR-EGRESS-${hash.toUpperCase()}`,
      table: `kube_runbook_egress_${hash}`,
      rules,
      cgroup: processScope ? d.cgroup!.replace(/^\/+/, '') : null,
      keepSourcePort: transport.type === 'ssh' ? (transport.port ?? 22) : null,
      // auto widened to the node (the lab): the node's agent (its own group) keeps the apiserver, as ssh keeps its connection
      ...(transport.type === 'agent' && params.scope === 'auto' && !processScope && transport.runAsGroup !== undefined
        ? { keepGid: transport.runAsGroup }
        : {}),
    };
  },

  ...scriptFault<EgressState>({
    code: 'FIREWALL_FAILED',
    timeoutMs: 60_000,
    apply: {
      script: applyRules,
      failed: 'block-kubelet-egress: could not add the rules',
      applied: (state) =>
        `block-kubelet-egress: ${state.node} drops ${state.rules.map((r) => `${r.ip}:${r.port}`).join(', ')} (${state.cgroup ? `cgroup ${state.cgroup}` : 'whole node'})`,
    },
    revert: { script: egressRevert, failed: 'block-kubelet-egress: could not remove the rules' },
  }),

  describe: (params) =>
    `drop kubelet traffic to ${params.endpoints?.join(', ') ?? 'the apiservers'} (scope ${params.scope}${
      params.scope === 'auto'
        ? ": the kubelet's traffic only; refused at preflight where it would widen to the whole node"
        : params.scope === 'node'
          ? ': every process of the node'
          : ''
    })`,
});
