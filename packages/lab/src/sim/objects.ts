import type { SimContainer } from './runtime.js';
import type { ProcessState } from './agent-process.js';
import type { ConditionLite, NodeLite, PodLite, SimNodeConfig } from './types.js';

/**
 * Pure builders of what a kubelet posts: the Node it registers, its NodeStatus, its Lease and the status of
 * the pods it runs. Times are passed in (milliseconds) so these are tested without a clock.
 */

/** RFC 3339 with microseconds, as metav1.MicroTime wants it (a Lease's renewTime). */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** RFC 3339 in whole seconds, as metav1.Time is stored. */
export function wholeTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const KUBELET_CONDITIONS: { type: string; status: string; reason: string; message: string }[] = [
  { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', message: 'kubelet has sufficient memory available' },
  { type: 'DiskPressure', status: 'False', reason: 'KubeletHasNoDiskPressure', message: 'kubelet has no disk pressure' },
  { type: 'PIDPressure', status: 'False', reason: 'KubeletHasSufficientPID', message: 'kubelet has sufficient PID available' },
  { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' },
];

/** Whether the Node's conditions differ from what this kubelet reports (e.g. the controller set Ready=Unknown). */
export function conditionsChanged(node: NodeLite | undefined): boolean {
  const have = node?.status?.conditions ?? [];
  return KUBELET_CONDITIONS.some((want) => {
    const c = have.find((x) => x.type === want.type);
    return !c || c.status !== want.status || c.reason !== want.reason;
  });
}

/** The conditions to post now: heartbeat now, transition time kept while the status stays the same. */
export function kubeletConditions(node: NodeLite | undefined, nowMs: number): ConditionLite[] {
  const now = wholeTime(nowMs);
  return KUBELET_CONDITIONS.map((want) => {
    const c = node?.status?.conditions?.find((x) => x.type === want.type);
    const same = c && c.status === want.status && c.lastTransitionTime;
    return { ...want, lastHeartbeatTime: now, lastTransitionTime: same ? c.lastTransitionTime! : now };
  });
}

function nodeLabels(cfg: SimNodeConfig): Record<string, string> {
  const labels: Record<string, string> = {
    'kubernetes.io/hostname': cfg.name,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'beta.kubernetes.io/os': 'linux',
    'beta.kubernetes.io/arch': 'amd64',
    ...cfg.labels,
  };
  if (cfg.zone) {
    labels['topology.kubernetes.io/zone'] = cfg.zone;
    labels['failure-domain.beta.kubernetes.io/zone'] = cfg.zone;
  }
  if (cfg.region) {
    labels['topology.kubernetes.io/region'] = cfg.region;
    labels['failure-domain.beta.kubernetes.io/region'] = cfg.region;
  }
  return labels;
}

const CAPACITY = { cpu: '8', memory: '32Gi', pods: '110', 'ephemeral-storage': '100Gi' };

/** The full NodeStatus this kubelet posts. */
export function nodeStatus(cfg: SimNodeConfig, node: NodeLite | undefined, nowMs: number) {
  return {
    capacity: CAPACITY,
    allocatable: CAPACITY,
    conditions: kubeletConditions(node, nowMs),
    addresses: [
      { type: 'InternalIP', address: cfg.ip },
      { type: 'Hostname', address: cfg.name },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    nodeInfo: {
      machineID: cfg.name,
      systemUUID: cfg.name,
      bootID: cfg.name,
      kernelVersion: 'simulated',
      osImage: 'kube-runbook kubelet simulator',
      containerRuntimeVersion: 'kr-sim://1',
      kubeletVersion: cfg.kubeletVersion,
      kubeProxyVersion: cfg.kubeletVersion,
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
  };
}

/** The Node a kubelet registers (nodes may carry their status on create). */
export function nodeObject(cfg: SimNodeConfig, nowMs: number) {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: cfg.name, labels: nodeLabels(cfg) },
    spec: { podCIDR: cfg.podCidr, podCIDRs: [cfg.podCidr] },
    status: nodeStatus(cfg, undefined, nowMs),
  };
}

/** The Lease body for a renewal (resourceVersion from the last one seen, so a conflict is detected). */
export function leaseObject(cfg: SimNodeConfig, nowMs: number, o: { resourceVersion?: string; nodeUid?: string }) {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: cfg.name,
      namespace: 'kube-node-lease',
      ...(o.resourceVersion ? { resourceVersion: o.resourceVersion } : {}),
      ...(o.nodeUid ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: cfg.name, uid: o.nodeUid }] } : {}),
    },
    spec: { holderIdentity: cfg.name, leaseDurationSeconds: Math.ceil(cfg.leaseDurationMs / 1000), renewTime: microTime(nowMs) },
  };
}

/** Whether the pod's status already says what the runtime says. */
export function podStatusCurrent(pod: PodLite, containers: SimContainer[]): boolean {
  const s = pod.status;
  if (!s || s.phase !== 'Running' || !containers.length || s.podIP !== containers[0]!.podIp) return false;
  if (s.conditions?.find((c) => c.type === 'Ready')?.status !== 'True') return false;
  return (s.containerStatuses ?? []).filter((c) => c.ready).length === containers.length;
}

/** Merge patch of the pod's status: Running and Ready, with its IP and one running status per container. */
export function podStatusPatch(hostIp: string, containers: SimContainer[], nowMs: number, process?: ProcessState) {
  const first = containers[0];
  const started = first?.startedAt ?? wholeTime(nowMs);
  const ready = process === undefined || process.kind === 'running';
  const phase =
    process?.kind === 'ended' ? (process.exitCode === 0 ? 'Succeeded' : 'Failed') : process?.kind === 'creating' ? 'Pending' : 'Running';
  const cond = (type: string, ok = true) => ({ type, status: ok ? 'True' : 'False', lastProbeTime: null, lastTransitionTime: started });
  return {
    status: {
      phase,
      hostIP: hostIp,
      podIP: first?.podIp,
      podIPs: first ? [{ ip: first.podIp }] : [],
      startTime: started,
      conditions: [cond('Initialized'), cond('Ready', ready), cond('ContainersReady', ready), cond('PodScheduled')],
      containerStatuses: containers.map((c, i) => ({
        name: c.container,
        image: c.image,
        imageID: `${c.image}@sim`,
        containerID: `kr-sim://${c.id}`,
        ready: i > 0 || ready,
        started: i > 0 || ready,
        restartCount: i === 0 && (process?.kind === 'exited' || process?.kind === 'ended') ? process.restarts : 0,
        ...(i === 0 && process ? processStatus(process, c.startedAt) : { state: { running: { startedAt: c.startedAt } } }),
      })),
    },
  };
}

/** The lowest free address of a /24 (.2 to .254). */
export function freePodIp(cidr: string, used: Set<string>): string | undefined {
  const base = cidr.replace(/\.\d+\/\d+$/, '');
  for (let i = 2; i < 255; i++) if (!used.has(`${base}.${i}`)) return `${base}.${i}`;
  return undefined;
}

/** Pod CIDR of the i-th simulated node (0-based) in 100.64.0.0/10: up to 16,384 nodes. */
export function podCidrOf(index: number): string {
  return `100.${64 + (index >> 8)}.${index & 255}.0/24`;
}

/** The state of a container whose command runs for real (the node agent), as a kubelet reports it. */
function processStatus(p: ProcessState, startedAt: string) {
  switch (p.kind) {
    case 'running':
      return { state: { running: { startedAt } } };
    case 'image':
      return { state: { waiting: { reason: p.reason, message: p.message } } };
    case 'creating':
      return { state: { waiting: { reason: 'ContainerCreating', message: p.message } } };
    case 'ended':
      return {
        state: { terminated: { exitCode: p.exitCode, reason: p.exitCode === 0 ? 'Completed' : 'Error', message: p.message, startedAt } },
      };
    case 'exited':
      return {
        state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 10s restarting failed container' } },
        lastState: { terminated: { exitCode: p.exitCode, reason: 'Error', message: p.message } },
      };
  }
}
