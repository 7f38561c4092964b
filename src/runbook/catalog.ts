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
