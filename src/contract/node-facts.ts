/**
 * What a probe's reading says about single nodes, declared by the probe (`meta.nodeFacts`): the run report draws a
 * lane per node from these facts alone, whatever the shape of the probe's value.
 */
export type NodeFact =
  /** The node's Lease: ms since its last renewal (null: it has none), and whether the probe holds it stale. */
  | { kind: 'lease'; node: string; ageMs: number | null; stale: boolean }
  /** The status of the node's Ready condition: True, False, Unknown; `none` without one, `missing` without the Node. */
  | { kind: 'ready'; node: string; status: string }
  /** The keys of the NoExecute taints on the node (those the probe watches). */
  | { kind: 'taints'; node: string; keys: readonly string[] }
  /** A pod bound to the node was deleted at `at` (clock ms), and why. */
  | { kind: 'deleted'; node: string; pod: string; at: number; cause: string }
  /** The earliest eviction predicted: the pod on the node, at `at` (clock ms). */
  | { kind: 'eviction'; node: string; pod: string; at: number };

export type NodeFactKind = NodeFact['kind'];

/** Each kind of fact as the reference docs name it. */
export const NODE_FACT_KINDS: Readonly<Record<NodeFactKind, string>> = {
  lease: "Lease age: the age of each selected node's Lease and whether it is stale",
  ready: "Ready: the status of each selected node's Ready condition",
  taints:
    'NoExecute taints: the keys on each tainted node; every reading lists every tainted node, so one it listed before and no longer does is untainted',
  deleted: 'pods deleted: each pod deleted, its node, when and why',
  eviction: 'predicted eviction: the pod evicted first, its node and when (a mark on the timeline)',
};

/** How a probe gives node facts: the kinds it gives, and the facts of one reading's value. */
export interface NodeFactsOf<V> {
  kinds: readonly NodeFactKind[];
  of(value: V): NodeFact[];
}

/** The facts a reading came with, as run events carry them beside the reading: the kinds its probe gives, and these. */
export interface ReadingFacts {
  kinds: readonly NodeFactKind[];
  facts: readonly NodeFact[];
}

/** The facts of a reading whose probe declares some (none for a reading without a value: it cannot tell). */
export function readingFacts<V>(declared: NodeFactsOf<V> | undefined, value: V | null): ReadingFacts | undefined {
  if (!declared || value === null) return undefined;
  return { kinds: declared.kinds, facts: declared.of(value) };
}
