import type { ActionCtx } from '../contract/context.js';
import { z } from 'zod';
import { KrError, quote } from '../core/errors.js';
import { cgroupPathProblem, CPU_PERIOD_US, readCpuScript, writeCpuScript, type CpuLimit, type CpuTarget } from './parts/cgroup-cpu.js';
import { describeTarget, runOnNode, serviceManager, serviceTarget, targetNode, type ServiceName } from '../nodes/services/index.js';
import { KR_FAIL, script } from '../nodes/services/script.js';
import { defineAction } from '../contract/action.js';
import { scriptFault } from './parts/script-fault.js';

/** The components a runbook names, and the service each is. */
const COMPONENTS = {
  apiserver: 'kube-apiserver',
  etcd: 'etcd',
  'controller-manager': 'kube-controller-manager',
  scheduler: 'kube-scheduler',
  kubelet: 'kubelet',
} as const satisfies Record<string, ServiceName>;
type Component = keyof typeof COMPONENTS;

const QUOTA_MESSAGE = 'expected a percentage of one CPU from 1% to 100%, such as 10%';

const Params = z.strictObject({
  component: z
    .enum(Object.keys(COMPONENTS) as [Component, ...Component[]])
    .meta({ description: 'whose processes starve: apiserver, etcd, controller-manager, scheduler or kubelet' }),
  quota: z
    .string({ error: QUOTA_MESSAGE })
    .regex(/^\d+(?:\.\d+)?%$/, { message: QUOTA_MESSAGE })
    .meta({ examples: ['10%'] })
    .transform((s) => Number(s.slice(0, -1)))
    .refine((n) => n >= 1 && n <= 100, { message: QUOTA_MESSAGE })
    .meta({
      description: 'how much CPU its cgroup may use, as a percentage of one CPU (1% to 100%): 10% is 10 ms in every 100 ms',
    }),
});

type State = CpuTarget & { node: string; component: Component; pid: number; limit: CpuLimit; previous: CpuLimit };

/** Read-only: the cgroup of the process in the cpu hierarchy (v1) or the unified one (v2), and who else is in it. */
function inspectScript(pid: number): string {
  return script(
    'starve-cpu inspect',
    { pid },
    KR_FAIL,
    '[ "$(id -u 2>/dev/null)" = 0 ] || kr_fail "limiting a cgroup needs root (run as root, or set transport.sudo in the inventory)"',
    '[ -r "/proc/$pid/cgroup" ] || kr_fail "no process $pid"',
    `v1=$(awk -F: '$1 != "0" { n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] == "cpu") { sub(/^[^:]*:[^:]*:/, ""); print; exit } }' "/proc/$pid/cgroup")`,
    'v2=$(sed -n "s/^0:://p" "/proc/$pid/cgroup" | head -n 1)',
    'if [ -n "$v1" ]; then echo "cgroup=1 $v1"; elif [ -n "$v2" ]; then echo "cgroup=2 $v2"; else kr_fail "no cpu or unified cgroup for $pid"; fi',
  );
}

const lines = (out: string) => new Map(out.split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const));

/** Limits the CPU of one component's own cgroup: an overloaded master or a starved kubelet (incident 3). */
export default defineAction({
  meta: {
    access: [],
    id: 'starve-cpu',
    summary: "Limit the CPU of one component's own cgroup to a share of one CPU (starved kubelets, overloaded masters, incident 3).",
    description:
      'Finds the process of `component` on each selected node (control-plane nodes by default) as the stop-* actions do, and the ' +
      'cgroup it runs in; then limits that cgroup to `quota` of one CPU with cgroup v2 `cpu.max` or cgroup v1 `cpu.cfs_quota_us` ' +
      'per a `cpu.cfs_period_us` of 100 ms. Everything in that cgroup shares the quota. A starved kubelet renews its Lease late ' +
      '(watch it with the `lease-renewal` probe) and, starved enough, not at all; a starved apiserver, etcd or controller-manager ' +
      'answers late and loses its leader Lease. The quota and period that were there before are recorded and put back. ' +
      'Preflight refuses when the process runs in the root cgroup, where the limit would starve the whole node.',
    params: Params,
    targets: 'nodes',
    defaultNodes: 'control-plane',
    kind: 'fault',
    layouts: {
      kubeadm:
        "the control plane's static pods by their container's process (their container's cgroup): with crictl the running container of that name in a kube-system pod, else the process of that program in a `kubepods` cgroup of the node's network namespace, never a look-alike such as a user's `/tmp/kube-apiserver`; the kubelet is the systemd unit `kubelet` (its `kubelet.service` cgroup, which needs the cpu controller on v2: `CPUAccounting=yes`)",
      k3s: "the apiserver, controller-manager, scheduler, etcd and a server's kubelet are all the `k3s` process: its whole cgroup is limited; an agent's kubelet is `k3s-agent`, whose cgroup also holds containerd",
      lab: "the lab process's cgroup: each control-plane member's apiserver, etcd, controller-manager and scheduler has a cpu cgroup of its own (`kube-runbook-<instance>-cp-N/<component>`; on cgroup v2 etcd's is its io cgroup), as has a real node's kubelet (`kube-runbook-<instance>-rnode-N/kubelet`); a simulated node's kubelet runs in the root cgroup and is refused; under `lab up --static-pods` the inventory has the kubeadm layout: the control plane's containers on cp-1 and the real nodes' kubelets",
    },
    undo: 'writes back the quota and period that were set before (usually none: `max`); a cgroup that is gone needs nothing; the node-side dead-man runs the same script',
  },

  // read-only, and all of it: a cgroup without the cpu controller is refused before anything is applied
  async preflight(ctx, params) {
    await look(ctx, params);
  },

  prepare: (ctx, params) => look(ctx, params),

  ...scriptFault<State>({
    code: 'STARVE_FAILED',
    timeoutMs: 30_000,
    apply: {
      script: (state) => writeCpuScript('apply', state, state.limit, false),
      failed: 'starve-cpu: cannot set the cpu quota',
      applied: (state) =>
        `starve-cpu: ${state.component} on ${state.node} limited to ${state.limit.quota} us per ${state.limit.period} us (cgroup ${state.cgroup})`,
    },
    revert: { script: (state) => revertScript(state), failed: 'starve-cpu: cannot restore the cpu quota' },
  }),

  describe: (p) => `limit the CPU of ${p.component} to ${p.quota}% of one CPU`,
});

/** Everything the revert needs: the process, its cgroup, the quota and period there are now. */
async function look(ctx: ActionCtx, params: z.output<typeof Params>): Promise<State> {
  const { node, pid, info } = await inspect(ctx, params.component);
  const target = cpuTarget(node, params.component, info.get('cgroup') ?? '');
  const r = await runOnNode(ctx, node, readCpuScript(target), {
    code: 'CPU_CGROUP_UNREADABLE',
    message: 'starve-cpu: cannot read the cpu quota',
    timeoutMs: 30_000,
  });
  const now = lines(r.stdout);
  const quota = now.get('quota') ?? '';
  const period = now.get('period') ?? '';
  if (!/^(?:\d+|max)$/.test(quota) || !/^\d+$/.test(period))
    throw new KrError(
      'CPU_CGROUP_UNREADABLE',
      `starve-cpu: the cpu quota of ${target.cgroup} on ${node} is not one the kernel writes (got ${quote(`${quota} ${period}`)})`,
    );
  const limit = { quota: String(Math.round((params.quota / 100) * CPU_PERIOD_US)), period: String(CPU_PERIOD_US) };
  return { node, component: params.component, pid, ...target, limit, previous: { quota, period } };
}

const revertScript = (s: State) => writeCpuScript('revert', s, s.previous, true);

function cpuTarget(node: string, component: Component, line: string): CpuTarget {
  const [version, ...path] = line.split(' ');
  const cgroup = path.join(' ');
  if (!cgroup.startsWith('/') || cgroup === '/' || /[\n\0]/.test(cgroup))
    throw new KrError(
      'CPU_CGROUP_UNSUITABLE',
      `starve-cpu: ${component} on ${node} runs in no cgroup of its own (got ${quote(cgroup)}); limiting the root cgroup would starve the whole node`,
    );
  const problem = cgroupPathProblem(cgroup);
  if (problem)
    throw new KrError(
      'CPU_CGROUP_UNSAFE',
      `starve-cpu: the cgroup of ${component} on ${node} (${quote(cgroup)}) is ${problem}; limiting it would write outside the cgroup hierarchy`,
    );
  return { version: version === '2' ? 2 : 1, cgroup };
}

async function inspect(ctx: ActionCtx, component: Component) {
  const node = targetNode(ctx, 'starve-cpu');
  const service = serviceTarget(ctx.inventory, node, COMPONENTS[component]);
  const p = await runOnNode(ctx, node.name, serviceManager(service).pid(service), {
    code: 'PREFLIGHT_FAILED',
    message: `starve-cpu: ${component} is not running (${describeTarget(service)})`,
    timeoutMs: 30_000,
  });
  const pid = Number(p.stdout.trim());
  if (!Number.isInteger(pid) || pid < 1)
    throw new KrError('PREFLIGHT_FAILED', `starve-cpu: no ${component} process id on ${node.name} (got ${quote(p.stdout.trim())})`);
  const r = await runOnNode(ctx, node.name, inspectScript(pid), {
    code: 'PREFLIGHT_FAILED',
    message: `starve-cpu: cannot find the cgroup of ${component}`,
    timeoutMs: 30_000,
  });
  return { node: node.name, pid, info: lines(r.stdout) };
}
