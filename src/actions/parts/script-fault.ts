import type { z } from 'zod';
import type { Action, RevertState } from '../../contract/action.js';
import { runOnNode } from '../../nodes/services/index.js';

/** A fault that is one script on its node, undone by another, which the node's dead-man runs by itself too. */
export interface ScriptFault<S> {
  /** The error code of either script failing, and how long each may take. */
  code: string;
  timeoutMs: number;
  /** The script that applies the fault, what is said when it fails (`on NODE (exit N): …` follows), and when it worked. */
  apply: { script(state: S): string; failed: string; applied(state: S): string };
  /** The script that undoes it (idempotent), and what is said when it fails. */
  revert: { script(state: S): string; failed: string };
}

/** `apply`, `revert` and `nodeSideRevert` of an action whose fault is `f`. */
export function scriptFault<S extends RevertState & { node: string }>(
  f: ScriptFault<S>,
): Pick<Action<z.ZodType, S>, 'apply' | 'revert' | 'nodeSideRevert'> {
  const run = (step: ScriptFault<S>['revert']) => ({ code: f.code, message: step.failed, timeoutMs: f.timeoutMs });
  return {
    async apply(ctx, state) {
      await runOnNode(ctx, state.node, f.apply.script(state), run(f.apply));
      ctx.log.info(f.apply.applied(state));
      return state;
    },
    async revert(ctx, state) {
      await runOnNode(ctx, state.node, f.revert.script(state), run(f.revert));
    },
    nodeSideRevert: (state) => f.revert.script(state),
  };
}
