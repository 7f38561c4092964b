import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, type Reading, type ReadingStatus } from '../contract/probe.js';
import { polled } from '../contract/readings.js';
import { promqlQuery } from './parts/promql.js';

const Op = z.enum(['<', '<=', '>', '>=', '==', '!=']);
const Comparator = z.union([
  z.strictObject({ op: Op.meta({ description: 'how each value compares…' }), value: z.number().meta({ description: '…to this' }) }),
  z.strictObject({
    between: z
      .tuple([z.number(), z.number()])
      .refine(([a, b]) => a <= b, { message: 'expected [min, max] with min ≤ max' })
      .meta({ description: 'each value within [min, max], bounds included' }),
  }),
]);
type Comparator = z.output<typeof Comparator>;

const Params = z
  .strictObject({
    url: z
      .url({ protocol: /^https?$/ })
      .optional()
      .meta({ description: "Prometheus's base URL (http://prometheus:9090); the inventory's spec.prometheus.url when absent" }),
    query: promqlQuery().meta({
      description: 'an instant PromQL query; every series it returns must meet the comparator',
      examples: ['sum(rate(apiserver_request_total{code=~"5.."}[1m]))'],
    }),
    comparator: Comparator.meta({ description: '{op: "<", value: 0.5} or {between: [min, max]}: what a healthy value is' }),
    for: duration()
      .prefault('0s')
      .meta({ description: 'how long the comparator must fail, without a break, before the reading is violated' }),
    interval: duration().prefault('5s').meta({ description: 'how often to ask' }),
    timeout: duration().prefault('3s').meta({ description: 'an answer slower than this counts as none (unknown)' }),
    empty: z
      .enum(['unknown', 'ok', 'violated'])
      .default('unknown')
      .meta({ description: 'what a result with no series (or only NaN) reads as' }),
    bearerTokenFile: z.string().min(1).optional().meta({
      description:
        'file holding a bearer token (read at each query, so a rotated token is picked up); sent only over https unless `tokenOverHttp`',
    }),
    tokenOverHttp: z.boolean().default(false).meta({
      description: 'send the bearer token over plain http too (anyone on the path can read it: only for a Prometheus on a trusted link)',
    }),
    ca: z.string().min(1).optional().meta({ description: 'CA certificate (PEM file) for https' }),
    insecure: z.boolean().default(false).meta({ description: "do not check the server's certificate" }),
  })
  .superRefine((p, ctx) => {
    if (p.bearerTokenFile && /^http:/i.test(p.url ?? '') && !p.tokenOverHttp)
      ctx.addIssue({
        code: 'custom',
        path: ['url'],
        message: 'the token of bearerTokenFile goes only over https: use an https:// url, or set tokenOverHttp: true',
      });
  });
type Params = z.output<typeof Params>;

/** Answers larger than this are refused (a query over too many series). */
const MAX_ANSWER = 8 * 1024 * 1024;

export interface Series {
  labels: Record<string, string>;
  value: number;
}

export interface PromqlValue {
  series: Series[];
  /** Clock time the comparator started failing, while it does. */
  failingSince?: number;
  error?: string;
}

function meets(c: Comparator, v: number): boolean {
  if ('between' in c) return v >= c.between[0] && v <= c.between[1];
  switch (c.op) {
    case '<':
      return v < c.value;
    case '<=':
      return v <= c.value;
    case '>':
      return v > c.value;
    case '>=':
      return v >= c.value;
    case '==':
      return v === c.value;
    case '!=':
      return v !== c.value;
  }
}

const healthy = (c: Comparator) => ('between' in c ? `within [${c.between[0]}, ${c.between[1]}]` : `${c.op} ${c.value}`);

const seriesName = (s: Series) => {
  const l = Object.entries(s.labels).map(([k, v]) => `${k}="${v}"`);
  return l.length ? `{${l.join(',')}}` : '{}';
};

interface QueryAnswer {
  status?: string;
  error?: string;
  data?: { resultType?: string; result?: unknown };
}

/** The series of an instant query's answer; NaN values are left out (a rate over no samples). */
function seriesOf(a: QueryAnswer): Series[] {
  const data = a.data ?? {};
  const num = (pair: unknown) => (Array.isArray(pair) ? Number(pair[1]) : Number.NaN);
  if (data.resultType === 'scalar') return [{ labels: {}, value: num(data.result) }].filter((s) => !Number.isNaN(s.value));
  if (data.resultType !== 'vector')
    throw new Error(`the query gives a ${data.resultType ?? 'result of no type'}, not an instant vector or a scalar`);
  const out: Series[] = [];
  for (const r of Array.isArray(data.result) ? (data.result as { metric?: Record<string, string>; value?: unknown }[]) : []) {
    const value = num(r.value);
    if (!Number.isNaN(value)) out.push({ labels: r.metric ?? {}, value });
  }
  return out;
}

/**
 * The token file for `url`, if any: the runbook's own, or the inventory's when `url` is the inventory's Prometheus
 * (its token never goes to a URL a runbook names). Over plain http only with `tokenOverHttp`.
 */
function tokenFor(ctx: Ctx, url: string, params: Params): string | undefined {
  const inv = ctx.inventory.spec.prometheus;
  const origin = (u: string) => new URL(u).origin;
  const own = params.bearerTokenFile !== undefined;
  const file = params.bearerTokenFile ?? (inv?.bearerTokenFile && origin(url) === origin(inv.url) ? inv.bearerTokenFile : undefined);
  if (!file) return undefined;
  const optIn = own ? params.tokenOverHttp : params.tokenOverHttp || inv?.tokenOverHttp;
  if (new URL(url).protocol !== 'https:' && !optIn)
    throw new Error(
      `not sending the token of bearerTokenFile over plain http to ${origin(url)}: use https, or set tokenOverHttp: true (${own ? 'the probe' : "the inventory's spec.prometheus"})`,
    );
  return file;
}

/** The body, up to MAX_ANSWER; a larger one is refused. */
async function bodyText(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_ANSWER) {
      body.destroy();
      throw new Error(`the answer is larger than ${MAX_ANSWER / 1024 / 1024} MiB: ask for fewer series`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** One instant query through undici (which follows no redirect), timed out by the run's clock. Errors throw. */
async function query(ctx: Ctx, url: string, params: Params, dispatcher: Agent): Promise<Series[]> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const tokenFile = tokenFor(ctx, url, params);
  if (tokenFile) headers.authorization = `Bearer ${(await readFile(tokenFile, 'utf8')).trim()}`;
  const ac = new AbortController();
  const onAbort = () => ac.abort(new Error('stopped'));
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  const cancel = ctx.clock.setTimer(params.timeout, () => ac.abort(new Error(`no answer within ${formatDuration(params.timeout)}`)));
  try {
    const u = new URL(`${url.replace(/\/$/, '')}/api/v1/query`);
    u.searchParams.set('query', params.query);
    const r = await request(u, { method: 'GET', headers, signal: ac.signal, dispatcher });
    if (r.statusCode >= 300 && r.statusCode < 400) {
      await r.body.dump();
      throw new Error(
        `HTTP ${r.statusCode}: a redirect to ${JSON.stringify(String(r.headers.location ?? ''))}, not followed (give the url it names)`,
      );
    }
    const text = await bodyText(r.body);
    let answer: QueryAnswer;
    try {
      answer = JSON.parse(text) as QueryAnswer;
    } catch {
      throw new Error(`HTTP ${r.statusCode}: not a Prometheus answer: ${text.slice(0, 120)}`);
    }
    if (r.statusCode !== 200 || answer.status !== 'success') throw new Error(`HTTP ${r.statusCode}: ${answer.error ?? 'error'}`);
    return seriesOf(answer);
  } catch (e) {
    throw ac.signal.aborted && ac.signal.reason instanceof Error ? ac.signal.reason : e;
  } finally {
    cancel();
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

/** A PromQL query against a comparator, at an interval, with Prometheus's `for`. */
export default defineProbe({
  meta: {
    id: 'promql',
    summary: 'An instant PromQL query at an interval: ok while every series meets the comparator; `for` as in alerting rules.',
    description:
      "Asks Prometheus's HTTP API (`/api/v1/query`) every `interval` and compares every series of the answer with " +
      '`comparator` (`{op, value}` or `{between: [min, max]}`), which states the healthy value. Violated once some ' +
      'series has failed it for `for` without a break (until then the reading is ok and says it is pending). A result ' +
      'with no series, or only NaN ones (a rate over no samples), reads as `empty` says (unknown by default). Unknown, ' +
      'never ok, while Prometheus cannot be reached, answers with an error or is slower than `timeout`. The url is the ' +
      "inventory's `spec.prometheus.url` when the runbook gives none; with neither the reading is unknown. The query's " +
      "syntax is checked by `validate` with the Prometheus project's own grammar (@prometheus-io/lezer-promql). A bearer " +
      "token goes only over https (or with `tokenOverHttp`), the inventory's only to the inventory's url; a redirect is " +
      'not followed, and an answer larger than 8 MiB is refused (unknown).',
    params: Params,
    access: [],
    numbers: {
      what: 'the value of each series, by its labels (`value` for one without labels)',
      of: (v: PromqlValue) => Object.fromEntries(v.series.map((s) => [Object.keys(s.labels).length ? seriesName(s) : 'value', s.value])),
    },
  },
  start(ctx, params) {
    const url = params.url ?? ctx.inventory.spec.prometheus?.url;
    const ca = params.ca ?? ctx.inventory.spec.prometheus?.ca;
    let dispatcher: Agent | undefined;
    let failingSince: number | undefined;
    const check = async (): Promise<Reading<PromqlValue>> => {
      const at = () => ctx.clock.now();
      const unknown = (error: string): Reading<PromqlValue> => {
        failingSince = undefined;
        return { status: 'unknown', at: at(), value: { series: [], error }, detail: error };
      };
      if (!url) return unknown('no Prometheus: the probe has no url and the inventory no spec.prometheus.url');
      let series: Series[];
      try {
        dispatcher ??= new Agent({ connect: { ca: ca ? await readFile(ca) : undefined, rejectUnauthorized: !params.insecure } });
        series = await query(ctx, url, params, dispatcher);
      } catch (e) {
        return unknown(`cannot query ${url}: ${messageOf(e)}`);
      }
      const now = at();
      if (series.length === 0) {
        failingSince = undefined;
        return { status: params.empty, at: now, value: { series }, detail: `no series (reads ${params.empty})` };
      }
      const failing = series.filter((s) => !meets(params.comparator, s.value));
      const shown = (s: Series) => `${series.length > 1 ? `${seriesName(s)} ` : ''}${s.value}`;
      if (!failing.length) {
        failingSince = undefined;
        return {
          status: 'ok',
          at: now,
          value: { series },
          detail: `${series.slice(0, 3).map(shown).join(', ')}${series.length > 3 ? ', …' : ''} (${healthy(params.comparator)})`,
        };
      }
      failingSince ??= now;
      const held = now - failingSince;
      const status: ReadingStatus = held >= params.for ? 'violated' : 'ok';
      const pending = status === 'ok' ? `; pending ${formatDuration(held)} of ${formatDuration(params.for)}` : '';
      return {
        status,
        at: now,
        value: { series, failingSince },
        detail: `${failing.slice(0, 3).map(shown).join(', ')}${failing.length > 3 ? ', …' : ''} not ${healthy(params.comparator)}${pending}`,
      };
    };
    const readings = polled(ctx, params.interval, check, (r) => `${r.status}|${r.detail}`);
    return (async function* () {
      try {
        yield* readings;
      } finally {
        await dispatcher?.close();
      }
    })();
  },
});
