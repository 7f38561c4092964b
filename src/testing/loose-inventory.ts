import { Inventory, type InventoryInput } from '../inventory/schema.js';

/**
 * Inventory.parse with node names, addresses and netns taken as given, unchecked: tests hand hostile values past the
 * schema (which refuses them) to show that every layer under it still quotes them (defence in depth).
 */
export function parseInventoryLoosely(input: InventoryInput): Inventory {
  const given = input.spec.nodes;
  const nodes = given.map((n, i) => ({
    ...n,
    name: `n${i}`,
    ...(n.address === undefined ? {} : { address: '127.0.0.1' }),
    ...(n.netns === undefined ? {} : { netns: `ns${i}` }),
  }));
  const parsed = Inventory.parse({ ...input, spec: { ...input.spec, nodes } });
  parsed.spec.nodes.forEach((n, i) => {
    const o = given[i]!;
    n.name = o.name;
    if (o.address !== undefined) n.address = o.address;
    if (o.netns !== undefined) n.netns = o.netns;
  });
  return parsed;
}
