import type { z } from 'zod';
import type { NodeSelector } from './selectors.js';

export type ModuleKind = 'action' | 'probe';

/** What the language needs to know of one action or probe to check its `with:`. */
export interface ParamsMeta {
  params: z.ZodType;
  /** Node-targeted actions take `with.nodes`, a NodeSelector, beside their own parameters. */
  targets?: 'nodes' | 'cluster';
  /** The selector used when `with.nodes` is absent. */
  defaultNodes?: NodeSelector;
  /** For a cluster action that its params can send to nodes instead: when (ActionMeta.nodesWhen). */
  nodesWhen?: NodesWhen;
}

/**
 * A cluster action whose params can send it to nodes: when `param` is `equals`, it is applied once per node of
 * `with.nodes` (which it then requires: it has no default) like a node-targeted action, each node with its own revert
 * and dead-man; otherwise once for the cluster, and `with.nodes` is refused.
 */
export interface NodesWhen {
  param: string;
  equals: string;
}

/** Whether an action with these (parsed) params is applied on nodes. */
export function targetsNodes(meta: Pick<ParamsMeta, 'targets' | 'nodesWhen'>, params: Record<string, unknown>): boolean {
  if (meta.targets === 'nodes') return true;
  return meta.nodesWhen !== undefined && params[meta.nodesWhen.param] === meta.nodesWhen.equals;
}

/**
 * The modules a runbook may name, as the language sees them. The runbook layer does not import the modules:
 * whoever loads a runbook hands it the catalog (the engine's registry, or a fake in tests).
 */
export interface ModuleCatalog {
  /** Every id of that kind, sorted. */
  ids(kind: ModuleKind): string[];
  /** The module's metadata (loading it on first use), or undefined when there is no such module. */
  meta(kind: ModuleKind, id: string): Promise<ParamsMeta | undefined>;
}
