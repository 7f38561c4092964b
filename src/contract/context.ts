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
  /** Work an action runs in this process while its fault holds (a request load); absent where nothing may run. */
  tasks?: ExecutorTasks;
}

/**
 * Work that runs in the executor process itself, not on a node: an action's `apply` starts it under a key it keeps in
 * its state, its `revert` stops it by that key. It ends with the process (a SIGKILL stops it at once, so it needs no
 * dead-man), when the run is stopped at once, and when the run ends. A process that did not start a key (`recover`)
 * has nothing to stop under it: the process that ran it is gone, and the work with it.
 */
export interface ExecutorTasks {
  /** Starts `run`, whose signal aborts on `stop(key)` and when the run stops; a key already running is refused. */
  start(key: string, run: (signal: AbortSignal) => Promise<void>): void;
  /** Aborts the work under `key` and waits for it to end; returns at once when nothing runs under it here. */
  stop(key: string): Promise<void>;
  /**
   * Cluster objects the work made that must not outlive this process: a watcher process of its own deletes them when
   * this one ends, a SIGKILL included, unless `forgetOnExit(key)` came first (the revert removed them). Absent where
   * no watcher can run (tests, `recover`).
   */
  deleteOnExit?(key: string, objects: readonly ExitObject[]): void;
  forgetOnExit?(key: string): void;
}

/** An object the exit watcher deletes: its API path, the uid it must still have, and what to call it in its log. */
export interface ExitObject {
  path: string;
  uid: string;
  what: string;
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
  /** In preflight and apply: every node the step applies the action on (a check across the selection, e.g. etcd's quorum). */
  selection?: readonly string[];
  /** In prepare and apply: how long the fault's node-side dead-man waits without keepalive (faultTtl, remediationTtl). */
  faultTtlMs?: number;
  /**
   * In prepare and apply, during a run: by when (the clock's ms) the run ends at the latest, by its maxDuration. What a
   * fault leaves running on its own can bound itself by this plus faultTtlMs: past it, the run has reverted the fault or
   * its dead-man has fired.
   */
  runEndsBy?: number;
}
