import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { duration } from '../core/zod-helpers.js';
import { polled } from '../contract/readings.js';
import { defineProbe, type Reading } from '../contract/probe.js';

const Params = z.strictObject({
  node: z.string().min(1).optional().meta({ description: 'inventory node to run on; this machine when absent' }),
  run: z
    .string()
    .min(1)
    .meta({
      description: 'POSIX sh script; exit 0 = ok, exit 1 = violated, anything else = unknown',
      examples: ['systemctl is-active --quiet containerd'],
    }),
  interval: duration().prefault('5s').meta({ description: 'how often to run it' }),
  timeout: duration().prefault('10s').meta({ description: 'a run that takes longer reads unknown' }),
});
type Params = z.output<typeof Params>;

/**
 * Runs a script at an interval. This is the one probe that polls: a script has no event stream.
 */
export default defineProbe({
  meta: {
    access: [],
    id: 'command',
    summary: 'Run a read-only script at an interval: exit 0 ok, 1 violated, anything else unknown.',
    description:
      "Runs `run` on `node` (or on the machine the executor runs on) every `interval`, through the node's transport. " +
      'Exit code 0 reads ok and 1 violated; any other code, a timeout or an unreachable node reads unknown. ' +
      "The last line the script prints is the reading's detail.",
    params: Params,
  },
  start: (ctx, params) =>
    polled(
      ctx,
      params.interval,
      () => runOnce(ctx, params),
      (r) => `${r.status}|${r.detail}`,
    ),
});

async function runOnce(ctx: Ctx, params: Params): Promise<Reading<{ code: number | null }>> {
  const options = { timeoutMs: params.timeout, signal: ctx.signal };
  try {
    const r = params.node ? await ctx.nodes.exec(params.node, params.run, options) : await ctx.nodes.execHere(params.run, options);
    const last = (r.stdout.trim().split('\n').pop() ?? '').slice(0, 200);
    const status = r.code === 0 ? 'ok' : r.code === 1 ? 'violated' : 'unknown';
    return { status, at: ctx.clock.now(), value: { code: r.code }, detail: last || `exit ${r.code}` };
  } catch (e) {
    return { status: 'unknown', at: ctx.clock.now(), value: { code: null }, detail: messageOf(e) };
  }
}
