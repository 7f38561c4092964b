import type { z } from 'zod';
import type { Layout } from '../inventory/schema.js';
import type { NodesWhen } from '../runbook/catalog.js';
import type { NodeSelector } from '../runbook/selectors.js';
import type { ApiAccess } from './access.js';
import type { ActionCtx } from './context.js';

/** Plain JSON, so a revert can be rebuilt from the journal in a new process. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
export type RevertState = { [key: string]: Json };

export interface ActionMeta<P extends z.ZodType = z.ZodType> {
  id: string;
  summary: string;
  /** Longer text for docs/actions.md. */
  description: string;
  /** Schema of `with:` (for node-targeted actions, without `nodes`, which the engine adds). */
  params: P;
  /** `nodes`: applied once per selected node, each with its own revert and dead-man. `cluster`: applied once. */
  targets: 'nodes' | 'cluster';
  /** Node selector used when `with.nodes` is absent. */
  defaultNodes?: NodeSelector;
  /**
   * A `cluster` action that runs on nodes when this param has this value: then applied once per node of `with.nodes`
   * (required), each with its own revert and dead-man (`targetsNodes` decides, in the language and in the plan).
   */
  nodesWhen?: NodesWhen;
  /** `fault` breaks something; `remediation` protects the cluster; `neutral` (run-command) can be either. */
  kind: 'fault' | 'remediation' | 'neutral';
  /** What it does on each layout (docs), or why it is refused there: a plan on an inventory of that layout is refused (exit 2). */
  layouts?: Partial<Record<Layout, string | { refused: string }>>;
  /** How it is undone (docs). */
  undo: string;
  /** The oldest Kubernetes minor version (1.x) it works on; preflight refuses it on an older server, a plan takes `orElse`. */
  minKubernetesMinor?: number;
  /** The Kubernetes API permissions it needs (empty when it works on nodes only): preflight checks them, `manifests` grants them. */
  access: readonly ApiAccess[];
  /**
   * Whether, with these params, the fault cuts every process of its node off from the apiserver (`yes`), may do so
   * depending on the node (`maybe`), or not (absent, `no`). A node agent is cut off too: such a fault on a node reached
   * through its agent is undone by the node's dead-man, not by the executor.
   */
  isolatesNode?(params: z.output<P>): 'yes' | 'maybe' | 'no';
  /** It stops the apiserver on its targets: on every control-plane node, the Kubernetes API is down while it holds. */
  stopsApiserver?: boolean;
  /**
   * While it holds, no pod is evicted for a NoExecute taint: the taint-eviction controller is off (nodes are still
   * tainted), or the whole controller-manager is stopped. The eviction forecast then predicts no eviction and says what
   * would happen the moment it is undone.
   */
  stopsEvictions?: 'taint-eviction' | 'controller-manager';
  /**
   * How long its node-side revert may wait, at most, for the cluster to be safe before it changes anything (after
   * the dead-man's ttl): what holds the run lock adds it, so the lock outlasts the revert.
   */
  nodeSideWaitMs?: number;
}

/**
 * An action. The engine calls, per target: `prepare` (read-only: everything the revert needs), journals that
 * state and arms the node-side dead-man with `nodeSideRevert(state)`, then `apply`. `revert` is idempotent and
 * works from the prepared state alone, so it is safe after a crash half-way through `apply`.
 */
export interface Action<P extends z.ZodType = z.ZodType, S extends RevertState = RevertState> {
  meta: ActionMeta<P>;
  /** Read-only checks on the target before any fault of the run is applied (tools present, service found). */
  preflight?(ctx: ActionCtx, params: z.output<P>): Promise<void>;
  prepare(ctx: ActionCtx, params: z.output<P>): Promise<S>;
  apply(ctx: ActionCtx, state: S): Promise<S>;
  revert(ctx: ActionCtx, state: S): Promise<void>;
  /** POSIX sh run on the node by the dead-man when the executor's keepalive stops; undefined when nothing runs on a node. */
  nodeSideRevert(state: S): string | undefined;
  /** One line for plans and reports: what apply does with these params. */
  describe?(params: z.output<P>): string;
}

/** What `meta.layouts` says of a layout, as docs and `describe` print it. */
export const layoutText = (said: string | { refused: string }): string => (typeof said === 'string' ? said : `refused: ${said.refused}`);

export function defineAction<P extends z.ZodType, S extends RevertState>(action: Action<P, S>): Action<P, S> {
  return action;
}
