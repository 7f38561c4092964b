import { formatDuration } from '../core/duration.js';
import { messageOf } from '../core/errors.js';
import type { NodeRole } from '../inventory/schema.js';
import { settingsFromFlags } from '../kube/controller-settings.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';

/** A node as `kube-runbook init` found it on the cluster. */
export interface FoundNode {
  name: string;
  /** InternalIP, else ExternalIP: what ssh connects to. */
  address?: string;
  roles: NodeRole[];
  zone?: string;
}

/** The node lifecycle controller's settings found on the controller-manager's command line, as the inventory writes them. */
export type FoundController = Partial<
  Record<
    | 'nodeMonitorGracePeriod'
    | 'nodeMonitorPeriod'
    | 'nodeEvictionRate'
    | 'secondaryNodeEvictionRate'
    | 'unhealthyZoneThreshold'
    | 'largeClusterSizeThreshold',
    string | number
  >
>;

/** What the cluster told `init`; anything absent was not found (`notes` says why, for the user). */
export interface Discovered {
  layout?: 'kubeadm' | 'k3s';
  /** Why the layout is what it is (`kube-system/kubeadm-config`, `k3s node labels`). */
  layoutFrom?: string;
  nodes?: FoundNode[];
  controller?: FoundController;
  notes: string[];
}

interface ObjectMeta {
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface NodeObject {
  metadata: ObjectMeta;
  status?: { addresses?: { type?: string; address?: string }[] };
}
interface PodObject {
  metadata: ObjectMeta;
  spec?: { nodeName?: string; containers?: { command?: string[]; args?: string[] }[] };
}

const ZONE = 'topology.kubernetes.io/zone';
const CONTROL_PLANE = ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'];
const MIRROR = 'kubernetes.io/config.mirror';
const TIMEOUT_MS = 10_000;

const isK3s = (n: NodeObject) =>
  n.metadata.labels?.['node.kubernetes.io/instance-type'] === 'k3s' ||
  Object.keys(n.metadata.annotations ?? {}).some((k) => k.startsWith('k3s.io/'));

/** The static pods' mirror pods in kube-system, by component (kube-apiserver, etcd, kube-controller-manager). */
async function mirrorPods(kube: KubeAccess, notes: string[]): Promise<PodObject[]> {
  try {
    const list = await kube.json!<{ items?: PodObject[] }>('/api/v1/namespaces/kube-system/pods', { timeoutMs: TIMEOUT_MS });
    return (list.items ?? []).filter((p) => p.metadata.annotations?.[MIRROR] !== undefined);
  } catch (e) {
    notes.push(`the pods of kube-system could not be listed: ${messageOf(e)}`);
    return [];
  }
}

async function hasKubeadmConfig(kube: KubeAccess, notes: string[]): Promise<boolean> {
  try {
    await kube.json!('/api/v1/namespaces/kube-system/configmaps/kubeadm-config', { timeoutMs: TIMEOUT_MS });
    return true;
  } catch (e) {
    if (!(e instanceof ApiStatusError && e.status === 404)) notes.push(`kube-system/kubeadm-config could not be read: ${messageOf(e)}`);
    return false;
  }
}

const component = (p: PodObject) => p.metadata.labels?.component ?? p.metadata.name.replace(/-[^-]+$/, '');

function controllerFrom(text: string): FoundController | undefined {
  const s = settingsFromFlags(text);
  const c: FoundController = {};
  if (s.nodeMonitorGracePeriodMs !== undefined) c.nodeMonitorGracePeriod = formatDuration(s.nodeMonitorGracePeriodMs);
  if (s.nodeMonitorPeriodMs !== undefined) c.nodeMonitorPeriod = formatDuration(s.nodeMonitorPeriodMs);
  if (s.nodeEvictionRate !== undefined) c.nodeEvictionRate = s.nodeEvictionRate;
  if (s.secondaryNodeEvictionRate !== undefined) c.secondaryNodeEvictionRate = s.secondaryNodeEvictionRate;
  if (s.unhealthyZoneThreshold !== undefined) c.unhealthyZoneThreshold = s.unhealthyZoneThreshold;
  if (s.largeClusterSizeThreshold !== undefined) c.largeClusterSizeThreshold = s.largeClusterSizeThreshold;
  return Object.keys(c).length ? c : undefined;
}

function addressOf(n: NodeObject): string | undefined {
  const a = n.status?.addresses ?? [];
  return (a.find((x) => x.type === 'InternalIP') ?? a.find((x) => x.type === 'ExternalIP'))?.address;
}

/**
 * What the cluster says of itself, read-only: the layout (kubeadm's `kube-system/kubeadm-config` or the mirror pods
 * of static control-plane pods; k3s's node labels and annotations), the nodes and their roles (node-role labels, the
 * nodes that run a kube-apiserver or etcd mirror pod), zones, and the controller-manager's eviction settings (its
 * mirror pod's command line, or the `k3s.io/node-args` of a k3s server). Throws only when the nodes cannot be listed.
 */
export async function discoverCluster(kube: KubeAccess): Promise<Discovered> {
  const notes: string[] = [];
  const nodes = (await kube.json!<{ items?: NodeObject[] }>('/api/v1/nodes', { timeoutMs: TIMEOUT_MS })).items ?? [];
  const pods = await mirrorPods(kube, notes);
  const on = (name: string) => new Set(pods.filter((p) => component(p) === name).map((p) => p.spec?.nodeName ?? ''));
  const apiservers = on('kube-apiserver');
  const etcds = on('etcd');
  const found: FoundNode[] = nodes
    .map((n) => {
      const labels = n.metadata.labels ?? {};
      const cp = CONTROL_PLANE.some((l) => l in labels) || apiservers.has(n.metadata.name);
      const etcd = 'node-role.kubernetes.io/etcd' in labels || etcds.has(n.metadata.name);
      const roles: NodeRole[] = cp || etcd ? [...(cp ? ['control-plane' as const] : []), ...(etcd ? ['etcd' as const] : [])] : ['worker'];
      const address = addressOf(n);
      const zone = labels[ZONE];
      return { name: n.metadata.name, roles, ...(address ? { address } : {}), ...(zone ? { zone } : {}) };
    })
    .sort((a, b) => Number(b.roles[0] !== 'worker') - Number(a.roles[0] !== 'worker') || a.name.localeCompare(b.name));
  const d: Discovered = { nodes: found.length ? found : undefined, notes };
  if (!found.length) notes.push('the cluster has no nodes');
  const k3s = nodes.filter(isK3s);
  if (k3s.length) {
    d.layout = 'k3s';
    d.layoutFrom = 'k3s node labels';
    const args = k3s.map((n) => n.metadata.annotations?.['k3s.io/node-args'] ?? '').join('\n');
    d.controller = controllerFrom(args);
  } else if (await hasKubeadmConfig(kube, notes)) {
    d.layout = 'kubeadm';
    d.layoutFrom = 'kube-system/kubeadm-config';
  } else if (apiservers.size) {
    d.layout = 'kubeadm';
    d.layoutFrom = 'static kube-apiserver pods';
  } else notes.push('neither kubeadm (kube-system/kubeadm-config, static control-plane pods) nor k3s (node labels) was recognized');
  const cm = pods.find((p) => component(p) === 'kube-controller-manager');
  if (cm) d.controller = controllerFrom((cm.spec?.containers ?? []).flatMap((c) => [...(c.command ?? []), ...(c.args ?? [])]).join('\n'));
  return d;
}
