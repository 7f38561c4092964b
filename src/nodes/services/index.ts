import { KrError, quote } from '../../core/errors.js';
import { labKubelet, type Inventory, type InventoryNode } from '../../inventory/schema.js';
import type { ExecResult, NodeAccess } from '../types.js';
import { processManager } from './process.js';
import { staticPod } from './static-pod.js';
import { systemd } from './systemd.js';
import type { ServiceManager, ServiceName, ServiceTarget, StaticPodTarget } from './types.js';
import { NOT_YET_EXIT } from './script.js';

export type { ServiceManager, ServiceName, ServiceTarget } from './types.js';

/** What a node script needs of an action's context. */
export interface OnNodeCtx {
  nodes: NodeAccess;
  signal: AbortSignal;
  node?: InventoryNode;
}

/** kubeadm's directory, unless the inventory's `spec.kubeadm.dir` says otherwise. */
const KUBEADM_DIR = '/etc/kubernetes';
/** Where kubeadm manifests are parked while their component is stopped: outside the directory the kubelet reads. */
const PARKED = 'kube-runbook-parked';

const STATIC_POD_HEALTH: Record<Exclude<ServiceName, 'kubelet' | 'haproxy'>, StaticPodTarget['health']> = {
  'kube-apiserver': { scheme: 'https', port: 6443, path: '/readyz', portFlag: '--secure-port' },
  'kube-controller-manager': { scheme: 'https', port: 10257, path: '/healthz', portFlag: '--secure-port' },
  'kube-scheduler': { scheme: 'https', port: 10259, path: '/healthz', portFlag: '--secure-port' },
  etcd: { scheme: 'http', port: 2381, path: '/health', portFlag: null },
};

const KUBELET_HEALTH = 'http://127.0.0.1:10248/healthz';

/**
 * Where and how `service` runs on `node`, from the inventory's layout:
 * kubeadm → static pods for the control plane and etcd, the systemd unit `kubelet`;
 * k3s → the systemd unit `k3s` on servers (apiserver, controller-manager, scheduler, etcd and the kubelet are
 * one process there) and `k3s-agent` for the kubelet of agents;
 * lab → `<lab.stateDir>/nodes/<node>/<service>`.
 * A load balancer (`haproxy`) is the systemd unit `haproxy` on kubeadm and k3s hosts, and the lab's `lb` process.
 */
export function serviceTarget(inventory: Inventory, node: InventoryNode, service: ServiceName): ServiceTarget {
  const layout = inventory.spec.layout;
  if (service === 'haproxy' && layout !== 'lab') return { manager: 'systemd', service, unit: 'haproxy', healthUrl: null };
  switch (layout) {
    case 'kubeadm': {
      // a lab of `lab up --static-pods`: kubeadm's layout for the control plane, its kubelets are lab services
      if (service === 'kubelet' && labKubelet(inventory, node)) {
        if (!inventory.spec.lab?.stateDir)
          throw new KrError('LAB_STATE_DIR_MISSING', 'the inventory has spec.kubeadm.kubelet lab but no spec.lab.stateDir');
        return labProcess(inventory.spec.lab.stateDir, node, service);
      }
      if (service === 'kubelet') return { manager: 'systemd', service, unit: 'kubelet', healthUrl: KUBELET_HEALTH };
      if (service === 'haproxy') throw new KrError('UNKNOWN_LAYOUT', 'haproxy is a systemd unit'); // handled above
      const dir = (inventory.spec.kubeadm?.dir ?? KUBEADM_DIR).replace(/\/+$/, '');
      return {
        manager: 'static-pod',
        service,
        manifest: `${dir}/manifests/${service}.yaml`,
        parked: `${dir}/${PARKED}/${service}.yaml`,
        process: service,
        health: STATIC_POD_HEALTH[service],
      };
    }
    case 'k3s': {
      const server = node.roles.includes('control-plane') || node.roles.includes('etcd');
      if (service === 'kubelet' && !server) return { manager: 'systemd', service, unit: 'k3s-agent', healthUrl: KUBELET_HEALTH };
      return { manager: 'systemd', service, unit: 'k3s', healthUrl: 'https://127.0.0.1:6443/readyz' };
    }
    case 'lab': {
      const stateDir = inventory.spec.lab?.stateDir;
      if (!stateDir) throw new KrError('LAB_STATE_DIR_MISSING', 'the inventory has layout lab but no spec.lab.stateDir');
      return labProcess(stateDir, node, service);
    }
    default:
      throw new KrError('UNKNOWN_LAYOUT', `no service manager for layout ${quote(layout)}`);
  }
}

function labProcess(stateDir: string, node: InventoryNode, service: ServiceName): ServiceTarget {
  return { manager: 'process', service, dir: `${stateDir.replace(/\/+$/, '')}/nodes/${node.name}/${service}` };
}

/** kubeadm's directory of a static pod's manifest (`<dir>/manifests/<service>.yaml`). */
export const kubeadmDirOf = (manifest: string): string => manifest.replace(/\/manifests\/[^/]+$/, '');

export function serviceManager(target: ServiceTarget): ServiceManager {
  switch (target.manager) {
    case 'systemd':
      return systemd as ServiceManager;
    case 'static-pod':
      return staticPod as ServiceManager;
    case 'process':
      return processManager as ServiceManager;
  }
}

/** One line naming the target, for logs and errors. */
export function describeTarget(t: ServiceTarget): string {
  switch (t.manager) {
    case 'systemd':
      return `systemd unit ${t.unit}`;
    case 'static-pod':
      return `static pod ${t.manifest}`;
    case 'process':
      return `lab process ${t.dir}`;
  }
}

/**
 * Runs a node script for an action; a non-zero exit becomes KrError(code) with the script's own words. A wait that
 * has not succeeded yet (exit NOT_YET_EXIT: `kr_not_yet`) is transient: a revert tries it again until its deadline.
 */
export async function runOnNode(
  ctx: OnNodeCtx,
  node: string,
  text: string,
  what: { code: string; message: string; timeoutMs: number; okCodes?: number[] },
): Promise<ExecResult> {
  const r = await ctx.nodes.exec(node, text, { timeoutMs: what.timeoutMs, signal: ctx.signal });
  if (r.code !== 0 && !(what.okCodes ?? []).includes(r.code)) {
    const why = (r.stderr.trim() || r.stdout.trim()).split('\n').slice(-5).join('; ').slice(0, 500);
    throw new KrError(
      what.code,
      `${what.message} on ${node} (exit ${r.code})${why ? `: ${why}` : ''}`,
      r.code === NOT_YET_EXIT ? { transient: 'health wait' } : {},
    );
  }
  return r;
}

/** The node an action runs on; node-targeted actions always get one from the engine. */
export function targetNode(ctx: OnNodeCtx, actionId: string): InventoryNode {
  if (!ctx.node) throw new KrError('NO_TARGET_NODE', `${actionId} runs on nodes, and none was given`);
  return ctx.node;
}
