import type { InventoryNode, NodeRole } from '../inventory/schema.js';
import type { NodeSelector } from '../runbook/selectors.js';
import { parseLabelSelector } from './labels.js';
import { zoneOf } from './resources.js';

/** What a probe knows of a cluster Node: its name and labels. */
export interface ClusterNode {
  name: string;
  labels: Record<string, string>;
}

/** Roles of a cluster node: the inventory's when it lists the node, else from the node-role labels. */
export function rolesOf(node: ClusterNode, inventory: InventoryNode[]): NodeRole[] {
  const listed = inventory.find((n) => n.name === node.name);
  if (listed) return listed.roles;
  const roles: NodeRole[] = [];
  if ('node-role.kubernetes.io/control-plane' in node.labels || 'node-role.kubernetes.io/master' in node.labels) roles.push('control-plane');
  if ('node-role.kubernetes.io/etcd' in node.labels) roles.push('etcd');
  if (!roles.length || 'node-role.kubernetes.io/worker' in node.labels) roles.push('worker');
  return roles;
}

/**
 * The cluster nodes a probe watches, by the runbook's node selector: `all`, `workers`, `control-plane`, or
 * filters on role, names, zone and labels (all must match), then `count`/`percent` of the matches in name order.
 * Probes look at the cluster's Nodes, so nodes of the inventory that are not Nodes (a control plane without a
 * kubelet) are not selected, except when named: a named node that is missing is reported as missing.
 */
export function resolveNodeSelector(selector: NodeSelector, inventory: InventoryNode[], cluster: ClusterNode[]): string[] {
  const nodes = [...cluster].sort((a, b) => a.name.localeCompare(b.name));
  if (selector === 'all') return nodes.map((n) => n.name);
  if (selector === 'workers') return nodes.filter((n) => rolesOf(n, inventory).includes('worker')).map((n) => n.name);
  if (selector === 'control-plane') return nodes.filter((n) => rolesOf(n, inventory).includes('control-plane')).map((n) => n.name);
  const matches = selector.selector ? parseLabelSelector(selector.selector) : undefined;
  const zoneOfNode = (n: ClusterNode) => inventory.find((i) => i.name === n.name)?.zone ?? zoneOf(n.labels);
  let picked = nodes
    .filter(
      (n) =>
        (!selector.role || rolesOf(n, inventory).includes(selector.role)) &&
        (!selector.names || selector.names.includes(n.name)) &&
        (!selector.zone || zoneOfNode(n) === selector.zone || n.labels['topology.kubernetes.io/zone'] === selector.zone) &&
        (!matches || matches(n.labels)),
    )
    .map((n) => n.name);
  if (selector.names && !selector.role && !selector.zone && !selector.selector)
    picked = [...new Set([...picked, ...selector.names])].sort((a, b) => a.localeCompare(b));
  if (selector.count !== undefined) picked = picked.slice(0, selector.count);
  else if (selector.percent !== undefined) picked = picked.slice(0, Math.max(1, Math.floor((picked.length * selector.percent) / 100)));
  return picked;
}
