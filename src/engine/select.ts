import { KrError, quote } from '../core/errors.js';
import type { InventoryNode } from '../inventory/schema.js';
import type { NodeSummary } from '../kube/types.js';
import type { NodeSelector } from '../runbook/selectors.js';

/**
 * Resolves a node selector against the inventory (and, for `selector`, the cluster's Node labels). Only nodes in
 * the inventory can be selected: the executor must know how to reach them. The result is sorted by name so a
 * plan is repeatable; `count`/`percent` take the first of those.
 */
export function selectNodes(
  sel: NodeSelector,
  inventory: InventoryNode[],
  clusterNodes?: NodeSummary[],
  where = 'nodes',
): InventoryNode[] {
  const sorted = [...inventory].sort((a, b) => a.name.localeCompare(b.name));
  if (sel === 'all') return sorted;
  if (sel === 'workers') return sorted.filter((n) => n.roles.includes('worker'));
  if (sel === 'control-plane') return sorted.filter((n) => n.roles.includes('control-plane'));
  for (const name of sel.names ?? [])
    if (!sorted.some((n) => n.name === name))
      throw new KrError('NODE_NOT_IN_INVENTORY', `${where}: node ${quote(name)} is not in the inventory (known: ${sorted.map((n) => n.name).join(', ')})`, {
        exit: 2,
      });
  let picked = sorted.filter(
    (n) =>
      (!sel.role || n.roles.includes(sel.role)) &&
      (!sel.names || sel.names.includes(n.name)) &&
      (!sel.zone || n.zone === sel.zone),
  );
  if (sel.selector) {
    if (!clusterNodes)
      throw new KrError('SELECTOR_NEEDS_CLUSTER', `${where}: label selector ${quote(sel.selector)} needs the cluster, which is not reachable`, {
        exit: 3,
      });
    const labelled = new Set(clusterNodes.filter((c) => matchesLabelSelector(sel.selector!, c.labels)).map((c) => c.name));
    picked = picked.filter((n) => labelled.has(n.name));
  }
  if (sel.count !== undefined) picked = picked.slice(0, sel.count);
  else if (sel.percent !== undefined) picked = picked.slice(0, Math.max(1, Math.floor((picked.length * sel.percent) / 100)));
  return picked;
}

/** Kubernetes label selector syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma = and. */
export function matchesLabelSelector(selector: string, labels: Record<string, string>): boolean {
  const parts = selector.match(/[^,(]+(?:\([^)]*\))?/g) ?? [];
  return parts.every((raw) => {
    const p = raw.trim();
    if (!p) return true;
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(p);
    if (m) {
      const values = m[3]!.split(',').map((v) => v.trim());
      const has = m[1]! in labels && values.includes(labels[m[1]!]!);
      return m[2] === 'in' ? has : !has;
    }
    m = /^(\S+?)\s*(==|=|!=)\s*(\S*)$/.exec(p);
    if (m) return m[2] === '!=' ? labels[m[1]!] !== m[3] : labels[m[1]!] === m[3];
    if (p.startsWith('!')) return !(p.slice(1).trim() in labels);
    return p in labels;
  });
}
