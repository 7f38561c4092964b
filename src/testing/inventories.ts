import type { InventoryInput } from '../inventory/schema.js';

/** An inventory with this spec: the envelope every test inventory shares (`name` is its metadata.name). */
export function inventoryOf(spec: InventoryInput['spec'], name = 'test'): InventoryInput {
  return { apiVersion: 'kube-runbook/v1', kind: 'Inventory', metadata: { name }, spec };
}

/** The layouts a node-side action's tests run it on. */
export type TestLayout = 'kubeadm' | 'k3s' | 'lab';

/** An inventory of `nodes` in `layout` (a lab one with its state directory), as the action tests write one. */
export function layoutInventory(layout: TestLayout, nodes: InventoryInput['spec']['nodes'], stateDir = '/var/lib/kr-lab'): InventoryInput {
  return inventoryOf({ layout, ...(layout === 'lab' ? { lab: { stateDir } } : {}), nodes });
}

/** An inventory of one control-plane node (cp-1 unless named) in `layout`. */
export const controlPlaneInventory = (layout: TestLayout, node = 'cp-1', stateDir?: string): InventoryInput =>
  layoutInventory(layout, [{ name: node, roles: ['control-plane'] }], stateDir);

/** What a node script is for: its first line, `# kube-runbook: <purpose>`; fake nodes answer by it. */
export const scriptPurpose = (script: string): string => script.split('\n')[0]!;
