import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';

const Params = z.strictObject({
  interval: duration().prefault('2s').meta({ description: 'how often to ask' }),
  timeout: duration().prefault('2s').meta({ description: 'an answer slower than this counts as none' }),
  maxLatency: duration().prefault('1s').meta({ description: 'violated when /readyz takes longer than this' }),
  unreachable: z
    .enum(['violated', 'unknown'])
    .default('violated')
    .meta({ description: 'what an apiserver that does not answer reads as: it is the thing observed, so violated by default' }),
});
type Params = z.output<typeof Params>;

export interface ApiserverHealth {
  readyz: number | null;
  livez: number | null;
  latencyMs: number | null;
  error?: string;
}

/** The apiserver's own health endpoints. Health has no event stream: this probe asks at an interval. */
export default defineProbe({
  meta: {
    access: [
      { nonResourceURL: '/readyz', verbs: ['get'], why: 'asks the apiserver whether it is ready' },
      { nonResourceURL: '/livez', verbs: ['get'], why: 'asks the apiserver whether it is live' },
    ],
    id: 'apiserver-health',
    summary: 'GET /readyz and /livez at an interval: status codes and latency.',
    description:
      'Asks the apiserver of the kubeconfig for `/readyz` and `/livez` every `interval`. Ok when both answer 200 and ' +
      '`/readyz` within `maxLatency`; violated when either answers otherwise or too slowly. An apiserver that does not ' +
      'answer at all reads `violated` (it is what this probe observes; `unreachable: unknown` makes it unknown instead). ' +
      'Readings are repeated only when something changes, at most once a second otherwise.',
    params: Params,
  },
  start: (ctx, params) =>
    polled(
      ctx,
      params.interval,
      () => check(ctx, params),
      (r) => `${r.status}|${r.detail.replace(/\d+ms|\d+(\.\d+)?s/g, '')}`,
    ),
});

async function get(ctx: Ctx, path: string, timeoutMs: number): Promise<{ status: number; ms: number }> {
  const start = ctx.clock.now();
  const a = await ctx.kube.raw(path, { timeoutMs, signal: ctx.signal });
  return { status: a.status, ms: ctx.clock.now() - start };
}

async function check(ctx: Ctx, params: Params): Promise<Reading<ApiserverHealth>> {
  try {
    const [readyz, livez] = await Promise.all([get(ctx, '/readyz', params.timeout), get(ctx, '/livez', params.timeout)]);
    const value = { readyz: readyz.status, livez: livez.status, latencyMs: readyz.ms };
    const healthy = readyz.status === 200 && livez.status === 200;
    const slow = readyz.ms > params.maxLatency;
    const detail = `readyz ${readyz.status}, livez ${livez.status}, ${formatDuration(readyz.ms)}${slow ? ` (slower than ${formatDuration(params.maxLatency)})` : ''}`;
    return { status: healthy && !slow ? 'ok' : 'violated', at: ctx.clock.now(), value, detail };
  } catch (e) {
    const error = messageOf(e);
    return {
      status: params.unreachable,
      at: ctx.clock.now(),
      value: { readyz: null, livez: null, latencyMs: null, error },
      detail: `apiserver does not answer: ${error}`,
    };
  }
}
