import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { sh } from '../host/host.js';
import { alive } from '../host/lock.js';
import { inSystemdNode } from '../host/systemd-node.js';
import { readLabInfo, simulatedWorker, type LabInfo } from '../host/info.js';
import { readRuntime, type RuntimeState } from '../sim/runtime.js';
import { controlPlaneNodes } from '../host/settings.js';
import { LB_NODE, OTEL_NODE, PROMETHEUS_NODE } from '../host/paths.js';
import { haStatus, type HaStatus } from './ha-status.js';
import { realNodeContainers, type RealNodeContainers } from './containers.js';
import { clusterSummary, type ClusterSummary } from './workload.js';

export interface ComponentStatus {
  node: string;
  service: string;
  running: boolean;
  healthy: boolean;
}

export interface LabStatus {
  info: LabInfo;
  components: ComponentStatus[];
  cluster?: ClusterSummary;
  clusterError?: string;
  runtimes: RuntimeState[];
  /** Real nodes' containers, from their containerd. */
  realRuntimes: RealNodeContainers[];
  /** An HA lab's etcd members and leader, controller leaders and HAProxy's backends. */
  ha?: HaStatus;
}

const CONTROL_PLANE_SERVICES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;

/** Every service of the lab (its `status` and `health` scripts), the cluster's nodes and pods, each node's runtime. */
export async function labStatus(instance = 'lab'): Promise<LabStatus> {
  const info = await readLabInfo(instance);
  const services: [string, string][] = [
    // a static-pod control plane is cp-1's containerd and kubelet (its pods are among the cluster's)
    ...controlPlaneNodes(info.settings).flatMap((cp) =>
      (info.settings.staticPods ? (['containerd', 'kubelet'] as const) : CONTROL_PLANE_SERVICES).map((s): [string, string] => [cp, s]),
    ),
    ...(info.members ? [[LB_NODE, 'haproxy'] as [string, string]] : []),
    ...(info.prometheus ? [[PROMETHEUS_NODE, 'prometheus'] as [string, string]] : []),
    ...(info.otel ? [[OTEL_NODE, 'otelcol'] as [string, string]] : []),
    ...info.nodes
      .filter((n) => n.roles.includes('worker') && !n.systemd)
      .flatMap((n): [string, string][] => [...(n.real ? [[n.name, 'containerd'] as [string, string]] : []), [n.name, 'kubelet']]),
  ];
  // the processes that simulate the nodes, a group of nodes each
  const groups = (await readdir(join(info.stateDir, 'kubelet-sims')).catch(() => [] as string[])).sort();
  const dirs = [
    ...services.map(([node, service]): [string, string, string] => [node, service, join(info.stateDir, 'nodes', node, service)]),
    ...groups.map((g): [string, string, string] => [g, 'kubelet-sims', join(info.stateDir, 'kubelet-sims', g)]),
  ];
  const components = await Promise.all(
    dirs.map(async ([node, service, dir]) => {
      const running = (await sh(shq(join(dir, 'status')))).code === 0;
      const healthy = running && (await sh(shq(join(dir, 'health')))).code === 0;
      return { node, service, running, healthy };
    }),
  );
  // a node whose PID 1 is systemd: its systemd, and kubeadm's kubelet unit in it
  for (const n of info.nodes.filter((x) => x.systemd)) {
    const pid = n.systemd?.pid;
    const running = pid !== undefined && alive(pid);
    const state = async (argv: string[]) => (running ? (await inSystemdNode(pid, argv, 10_000)).stdout.trim() : '');
    const system = await state(['systemctl', 'is-system-running']);
    components.push({ node: n.name, service: 'systemd', running, healthy: system === 'running' || system === 'degraded' });
    const kubelet = await state(['systemctl', 'is-active', 'kubelet']);
    components.push({ node: n.name, service: 'kubelet', running: kubelet === 'active', healthy: kubelet === 'active' });
  }
  const status: LabStatus = { info, components, runtimes: [], realRuntimes: [] };
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfig);
    status.cluster = await clusterSummary(kc);
    if (info.members) status.ha = await haStatus(info, kc);
  } catch (e) {
    status.clusterError = messageOf(e);
  }
  // the simulator's containers; a real node's are containerd's
  for (const n of info.nodes.filter(simulatedWorker)) status.runtimes.push(await readRuntime(info.stateDir, n.name));
  status.realRuntimes = await Promise.all(info.nodes.filter((x) => x.runtime).map(realNodeContainers));
  return status;
}
