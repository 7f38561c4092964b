import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { Inventory, type InventoryInput } from 'kube-runbook/internal/inventory/schema.js';
import { goDuration } from '../host/settings.js';
import type { LabInfo } from '../host/info.js';
import { join } from 'node:path';
import { kubernetesDir } from './static-pods.js';
import { mountNsFile } from '../host/mount-ns.js';
import { labSshFiles } from '../host/paths.js';

/**
 * The inventory runbooks use as it is: layout `lab` (`kubeadm` with `--static-pods`, its directory under cp-1's
 * state; with `--kubeadm`, kubeadm's own /etc/kubernetes on each node, whose mount namespace the netns transport
 * enters), transport `netns`, every controller setting the lab runs with,
 * and the lab's Prometheus (`spec.prometheus.url`, which promql probes ask when a runbook gives no url).
 */
export function labInventory(info: LabInfo): InventoryInput {
  const s = info.settings;
  return {
    apiVersion: 'kube-runbook/v1',
    kind: 'Inventory',
    metadata: {
      name: info.context,
      description:
        `kube-runbook lab ${info.instance}: a real control plane` +
        (info.members ? ` of ${info.members.length} members behind HAProxy (the VIP ${new URL(info.apiserverUrl).host})` : '') +
        (s.kubeadm
          ? ` made by kubeadm (init on cp-1, join of ${info.members ? 'the other members and ' : ''}the real nodes): static pods of ${info.members ? "each member's" : "cp-1's"} kubelet (kubeadm layout)`
          : s.staticPods
            ? ' run as static pods of a real kubelet (kubeadm layout)'
            : '') +
        ` and ${s.nodes} simulated kubelets` +
        (s.realNodes ? ` and ${s.realNodes} real nodes` : '') +
        (s.systemdNodes ? ` and ${s.systemdNodes} whose PID 1 is systemd, reached over ssh` : ''),
    },
    spec: {
      layout: s.staticPods ? 'kubeadm' : 'lab',
      // kubeadm's lab: each node's /etc/kubernetes is its own, in its mount namespace; --static-pods: cp-1's directory
      ...(s.staticPods
        ? { kubeadm: { ...(s.kubeadm ? {} : { dir: kubernetesDir(join(info.stateDir, 'nodes', 'cp-1')) }), kubelet: 'lab' as const } }
        : {}),
      kubeconfig: 'kubeconfig',
      context: info.context,
      transport: { type: 'netns' },
      apiserver: { endpoints: [info.apiserverUrl.replace(/^https:\/\//, '')] },
      controller: {
        nodeMonitorGracePeriod: goDuration(s.nodeMonitorGracePeriod),
        nodeMonitorPeriod: goDuration(s.nodeMonitorPeriod),
        nodeStartupGracePeriod: goDuration(s.nodeStartupGracePeriod),
        nodeEvictionRate: s.nodeEvictionRate,
        secondaryNodeEvictionRate: s.secondaryNodeEvictionRate,
        unhealthyZoneThreshold: s.unhealthyZoneThreshold,
        largeClusterSizeThreshold: s.largeClusterSizeThreshold,
        defaultTolerationSeconds: s.defaultTolerationSeconds,
        leaseDuration: goDuration(s.leaseDuration),
      },
      ...(info.prometheus ? { prometheus: { url: info.prometheus.url } } : {}),
      lab: { stateDir: info.stateDir },
      nodes: info.nodes.map((n) => ({
        name: n.name,
        address: n.ip,
        roles: n.roles,
        ...(n.zone ? { zone: n.zone } : {}),
        // a node whose PID 1 is systemd is a machine of its own: its sshd, its kubelet unit (host keys checked)
        ...(n.systemd
          ? {
              transport: { type: 'ssh' as const, user: 'root', ...labSshFiles(info.stateDir), ignoreUserConfig: true },
              kubelet: 'systemd' as const,
            }
          : { netns: n.netns, ...(s.kubeadm ? { mountns: mountNsFile(info.instance, n.name) } : {}) }),
      })),
    },
  };
}

/** Writes inventory.yaml after checking it against the inventory schema. */
export async function writeInventory(file: string, info: LabInfo): Promise<void> {
  const doc = labInventory(info);
  Inventory.parse(doc);
  const header = `# kube-runbook lab ${info.instance}: written by \`kube-runbook-lab up\`; paths are relative to this file.\n`;
  await writeFile(file, header + stringify(doc), { mode: 0o644 });
}
