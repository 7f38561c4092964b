import type { Inventory, InventoryNode } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import type { NodeAccess } from '../nodes/types.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';

/** Everything a module touches. Modules never build clients or read the real clock themselves. */
export interface Ctx {
  runId: string;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
  dryRun: boolean;
  inventory: Inventory;
  /** The cluster; throws KrError(`KUBE_UNAVAILABLE`) when no kubeconfig could be loaded. */
  readonly kube: KubeAccess;
  nodes: NodeAccess;
  /**
   * Benchmarks set it: every judgement a watch-driven probe makes runs through `judge`, which can time it, told how many
   * watch changes it judges together (0: woken by a timer).
   */
  profile?: { judge<T>(fn: () => T, changes: number): T };
}

/** An action's context: for node-targeted actions, the node it is applied on. */
export interface ActionCtx extends Ctx {
  node?: InventoryNode;
  /** In preflight: every node the step applies the action on (a check across the selection, e.g. etcd's quorum). */
  selection?: readonly string[];
}
