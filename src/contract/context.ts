import type { Inventory, InventoryNode } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import type { NodeAccess } from '../nodes/types.js';
import type { AgentKeys } from '../nodes/agent-auth.js';
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
  /** The keys this process signs its node agents' requests with and checks their results by (the agent transport has the same). */
  agentKeys?: AgentKeys;
  /**
   * Benchmarks set it: every judgement a watch-driven probe makes runs through `judge`, which can time it, told how many
   * watch changes it judges together (0: woken by a timer).
   */
  profile?: { judge<T>(fn: () => T, changes: number): T };
  /** What this run holds applied that changes how the cluster behaves, for probes that model it; absent outside a run. */
  applied?: AppliedEffects;
}

/** An applied action that stops evictions (ActionMeta.stopsEvictions), as the eviction forecast reads it. */
export interface AppliedEffect {
  action: string;
  node?: string;
  stops: 'taint-eviction' | 'controller-manager';
}

export interface AppliedEffects {
  current(): readonly AppliedEffect[];
  /** Called after each change; returns the unsubscribe. */
  subscribe(fn: () => void): () => void;
}

/** An action's context: for node-targeted actions, the node it is applied on. */
export interface ActionCtx extends Ctx {
  node?: InventoryNode;
  /** In preflight: every node the step applies the action on (a check across the selection, e.g. etcd's quorum). */
  selection?: readonly string[];
}
