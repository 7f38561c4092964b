import { z } from 'zod';
import { KrError } from '../core/errors.js';
import type { ActionCtx } from '../contract/context.js';
import { duration } from '../core/zod-helpers.js';
import { defineAction } from '../contract/action.js';

const Params = z.strictObject({
  apply: z
    .string()
    .min(1)
    .meta({ description: 'POSIX sh script that applies the change', examples: ['systemctl stop containerd'] }),
  revert: z
    .string()
    .min(1)
    .meta({ description: 'POSIX sh script that undoes it; must be idempotent', examples: ['systemctl start containerd'] }),
  check: z.string().min(1).optional().meta({ description: 'read-only preflight script; a non-zero exit refuses the run' }),
  timeout: duration().prefault('60s').meta({ description: 'limit for each script' }),
});

type State = { node: string; apply: string; revert: string; timeoutMs: number };

/** The generic escape hatch: an apply script and its revert, run on each selected node through its transport. */
export default defineAction({
  meta: {
    access: [],
    id: 'run-command',
    summary: 'Run a shell script on nodes, and its revert script when rolling back.',
    description:
      'Runs `apply` on each selected node through its transport (ssh, netns or local), as a POSIX sh script sent on stdin. ' +
      'Rollback runs `revert` on each node where `apply` ran, and so does the node-side dead-man if the executor disappears, ' +
      'so `revert` must be idempotent and must not depend on the executor.',
    params: Params,
    targets: 'nodes',
    defaultNodes: 'all',
    kind: 'neutral',
    layouts: {
      kubeadm: 'runs the scripts as the ssh user (through `sudo -n` when the inventory says so)',
      k3s: 'runs the scripts as the ssh user (through `sudo -n` when the inventory says so)',
      lab: "runs the scripts inside the node's network namespace",
    },
    undo: 'runs `revert` on the node; the dead-man runs the same script after `faultTtl` without keepalive',
  },
  async preflight(ctx, params) {
    if (params.check) await run(ctx, params.check, params.timeout, 'check', 'PREFLIGHT_CHECK_FAILED');
  },
  async prepare(ctx, params): Promise<State> {
    return { node: target(ctx), apply: params.apply, revert: params.revert, timeoutMs: params.timeout };
  },
  async apply(ctx, state) {
    await run(ctx, state.apply, state.timeoutMs, 'apply');
    return state;
  },
  async revert(ctx, state) {
    await run(ctx, state.revert, state.timeoutMs, 'revert');
  },
  nodeSideRevert: (state) => state.revert,
  describe: (params) => `apply: ${oneLine(params.apply)}; revert: ${oneLine(params.revert)}`,
});

function target(ctx: ActionCtx): string {
  if (!ctx.node) throw new KrError('NO_TARGET_NODE', 'run-command runs on nodes, and none was given');
  return ctx.node.name;
}

async function run(ctx: ActionCtx, script: string, timeoutMs: number, what: string, code = 'COMMAND_FAILED') {
  const node = target(ctx);
  const r = await ctx.nodes.exec(node, script, { timeoutMs, signal: ctx.signal });
  if (r.code !== 0)
    throw new KrError(code, `run-command ${what} failed on ${node} (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(0, 500)}`);
}

const oneLine = (s: string) => {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > 60 ? `${t.slice(0, 59)}…` : t;
};
