import { byCodeUnit } from '../core/order.js';
import { KrError, quote } from '../core/errors.js';
import type { InventoryNode, NodeRole } from '../inventory/schema.js';
import type { NodeSelector } from '../runbook/selectors.js';
import { parseLabelSelector, sameLabels } from './labels.js';
import { type SlimNode, zoneOf } from './resources.js';
import type { NodeSummary } from './types.js';
import type { WatchHandle } from './watch.js';

/**
 * One way to read a runbook's node selector, for plans (which inventory nodes an action changes) and for probes
 * (which cluster Nodes they watch): `all`, `workers`, `control-plane`, or filters on role, names, zone and labels
 * (all must match), then `count`/`percent` of the matches in name order, so a plan is repeatable.
 */
interface Candidate {
  name: string;
  roles: readonly NodeRole[];
  /** The zones it counts as in (the inventory's, the topology label's). */
  zones: (string | undefined)[];
  /** Undefined when labels cannot be known (a plan made without the cluster); null for a node the cluster does not have. */
  labels: Record<string, string> | null | undefined;
}

function pick(sel: NodeSelector, candidates: Candidate[], where: string): string[] {
  const sorted = [...candidates].sort((a, b) => byCodeUnit(a.name, b.name));
  if (sel === 'all') return sorted.map((n) => n.name);
  if (sel === 'workers') return sorted.filter((n) => n.roles.includes('worker')).map((n) => n.name);
  if (sel === 'control-plane') return sorted.filter((n) => n.roles.includes('control-plane')).map((n) => n.name);
  const matches = sel.selector ? parseLabelSelector(sel.selector) : undefined;
  let picked = sorted.filter((n) => {
    if (matches && n.labels === undefined)
      throw new KrError(
        'SELECTOR_NEEDS_CLUSTER',
        `${where}: label selector ${quote(sel.selector!)} needs the cluster's Node labels, and this plan has no cluster (offline or not reachable)`,
        {
          exit: 3,
        },
      );
    return (
      (!sel.role || n.roles.includes(sel.role)) &&
      (!sel.names || sel.names.includes(n.name)) &&
      (!sel.zone || n.zones.includes(sel.zone)) &&
      (!matches || (n.labels !== null && matches(n.labels!)))
    );
  });
  if (sel.count !== undefined) picked = picked.slice(0, sel.count);
  else if (sel.percent !== undefined) picked = picked.slice(0, Math.max(1, Math.floor((picked.length * sel.percent) / 100)));
  return picked.map((n) => n.name);
}

/**
 * The inventory nodes a plan changes. Only nodes in the inventory can be selected (the executor must know how to
 * reach them); a label `selector` reads the cluster's Node labels, so it needs `clusterNodes`.
 */
export function selectNodes(sel: NodeSelector, inventory: InventoryNode[], clusterNodes?: NodeSummary[], where = 'nodes'): InventoryNode[] {
  if (typeof sel === 'object')
    for (const name of sel.names ?? [])
      if (!inventory.some((n) => n.name === name))
        throw new KrError(
          'NODE_NOT_IN_INVENTORY',
          `${where}: node ${quote(name)} is not in the inventory (known: ${[...inventory.map((n) => n.name)].sort().join(', ')})`,
          { exit: 2 },
        );
  const labels = clusterNodes && new Map(clusterNodes.map((c) => [c.name, c.labels]));
  const candidates = inventory.map((n) => ({
    name: n.name,
    roles: n.roles,
    zones: [n.zone],
    labels: labels ? (labels.get(n.name) ?? null) : undefined,
  }));
  const names = pick(sel, candidates, where);
  return names.map((name) => inventory.find((n) => n.name === name)!);
}

/** Roles of a cluster node: the inventory's when it lists the node, else from the node-role labels. */
function rolesOf(node: NodeSummary, inventory: InventoryNode[]): NodeRole[] {
  const listed = inventory.find((n) => n.name === node.name);
  if (listed) return listed.roles;
  const roles: NodeRole[] = [];
  if ('node-role.kubernetes.io/control-plane' in node.labels || 'node-role.kubernetes.io/master' in node.labels)
    roles.push('control-plane');
  if ('node-role.kubernetes.io/etcd' in node.labels) roles.push('etcd');
  if (!roles.length || 'node-role.kubernetes.io/worker' in node.labels) roles.push('worker');
  return roles;
}

/**
 * The cluster Nodes a probe watches. Probes look at the cluster's Nodes, so inventory nodes that are not Nodes (a
 * control plane without a kubelet) are not selected, except when named only by name: a named node that is missing
 * is then reported as missing. A node's zone is the inventory's, else its topology label.
 */
export function resolveNodeSelector(selector: NodeSelector, inventory: InventoryNode[], cluster: NodeSummary[]): string[] {
  const candidates: Candidate[] = cluster.map((n) => ({
    name: n.name,
    roles: rolesOf(n, inventory),
    zones: [inventory.find((i) => i.name === n.name)?.zone ?? zoneOf(n.labels), n.labels['topology.kubernetes.io/zone']],
    labels: n.labels,
  }));
  if (typeof selector === 'object' && selector.names && !selector.role && !selector.zone && !selector.selector)
    for (const name of selector.names)
      if (!cluster.some((n) => n.name === name)) candidates.push({ name, roles: [], zones: [], labels: null });
  return pick(selector, candidates, 'nodes');
}

/** A node selector's Nodes, kept for a watch of Nodes (see trackNodeSelection). */
export interface NodeSelection {
  /** The selected Nodes' names, in name order. */
  names(): readonly string[];
  has(name: string): boolean;
}

/**
 * resolveNodeSelector over a watch of Nodes, worked out again only after a Node is added or deleted, a Node's
 * labels change, or the watch relists: not on every judgement or event, which at thousands of nodes would be most
 * of a probe's work (a Node's status update every minute, a lease renewal every 10 s, changes nothing it selects).
 */
export function trackNodeSelection(selector: NodeSelector, inventory: InventoryNode[], nodes: WatchHandle<SlimNode>): NodeSelection {
  let names: string[] | undefined;
  let set: Set<string> | undefined;
  nodes.subscribe((c) => {
    if (c.type === 'freshness') return;
    if (c.type !== 'modified' || c.relist || !c.previous || !sameLabels(c.previous.labels, c.object.labels)) names = set = undefined;
  });
  const current = () => (names ??= resolveNodeSelector(selector, inventory, [...nodes.store.values()]));
  return {
    names: current,
    has: (name) => (set ??= new Set(current())).has(name),
  };
}
