import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { httpGet } from '../kube/http-get.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';
import { compilePattern, patternProblem, type Pattern } from '../core/pattern.js';

/** Bodies are read up to this; a longer one is cut, and `bodyMatches` reads what was read. */
const MAX_BODY = 1024 * 1024;

/** An RE2 pattern param: checked when the runbook is validated. */
const rePattern = () =>
  z
    .string()
    .min(1)
    .superRefine((s, ctx) => {
      const p = patternProblem(s);
      if (p) ctx.addIssue({ code: 'custom', message: p });
    });

const Params = z.strictObject({
  url: z
    .url({ protocol: /^https?$/ })
    .meta({ description: 'http:// or https:// URL to GET', examples: ['https://shop.example.com/healthz'] }),
  interval: duration().prefault('5s').meta({ description: 'how often to ask' }),
  timeout: duration().prefault('3s').meta({ description: 'an answer slower than this counts as none' }),
  status: z
    .array(z.number().int().min(100).max(599))
    .min(1)
    .optional()
    .meta({ description: 'status codes that are ok; any 2xx or 3xx when absent' }),
  bodyMatches: rePattern()
    .optional()
    .meta({ description: 'an RE2 regular expression the body must match somewhere (its first 1 MiB is read); matched in linear time' }),
  maxLatency: duration().optional().meta({ description: 'violated when the answer takes longer than this' }),
  ca: z.string().min(1).optional().meta({ description: 'CA certificate (PEM file) for https' }),
  insecure: z.boolean().default(false).meta({ description: "do not check the server's certificate" }),
  unreachable: z.enum(['violated', 'unknown']).default('violated').meta({ description: 'what no answer at all reads as' }),
});
type Params = z.output<typeof Params>;

export interface HttpValue {
  status: number | null;
  latencyMs: number | null;
  error?: string;
}

/** A URL's answer at an interval (a service's health endpoint, a load balancer): status, body, latency. */
export default defineProbe({
  meta: {
    access: [],
    id: 'http',
    summary: 'GET a URL at an interval: ok on an expected status (and body), violated otherwise.',
    description:
      'GETs `url` from the machine the executor runs on every `interval`. Ok when the status is one of `status` (any ' +
      '2xx or 3xx by default), the body matches `bodyMatches` if given (RE2 syntax, linear time; the first 1 MiB of the ' +
      'body is read), and the answer came within `maxLatency` if given. ' +
      'No answer within `timeout` or a refused connection reads violated (or unknown with `unreachable: unknown`). ' +
      'Polled: an HTTP endpoint has no event stream. Readings are repeated only on change, at most once a second otherwise.',
    params: Params,
  },
  start(ctx, params) {
    const body = params.bodyMatches ? compilePattern(params.bodyMatches) : undefined;
    return polled(
      ctx,
      params.interval,
      () => check(ctx, params, body),
      (r) => `${r.status}|${r.value.status}|${r.value.error ?? ''}`,
    );
  },
});

async function check(ctx: Ctx, params: Params, body?: Pattern): Promise<Reading<HttpValue>> {
  try {
    const a = await httpGet(params.url, {
      timeoutMs: params.timeout,
      signal: ctx.signal,
      clock: ctx.clock,
      ca: params.ca,
      insecure: params.insecure,
      maxBytes: MAX_BODY,
    });
    const statusOk = params.status ? params.status.includes(a.status) : a.status >= 200 && a.status < 400;
    const bodyOk = !body || body.test(a.body);
    const fast = params.maxLatency === undefined || a.ms <= params.maxLatency;
    const problems = [
      !statusOk && 'unexpected status',
      !bodyOk && `body does not match /${body?.source}/${a.truncated ? ' in its first 1 MiB' : ''}`,
      !fast && 'too slow',
    ].filter(Boolean);
    return {
      status: problems.length ? 'violated' : 'ok',
      at: ctx.clock.now(),
      value: { status: a.status, latencyMs: a.ms },
      detail: `${a.status} in ${formatDuration(a.ms)}${problems.length ? `: ${problems.join(', ')}` : ''}`,
    };
  } catch (e) {
    const error = messageOf(e);
    return {
      status: params.unreachable,
      at: ctx.clock.now(),
      value: { status: null, latencyMs: null, error },
      detail: `no answer: ${error}`,
    };
  }
}
