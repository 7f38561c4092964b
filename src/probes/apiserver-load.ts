import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';
import { type Buckets, delta, histogram, quantile, series } from '../kube/prometheus.js';

const Params = z.strictObject({
  interval: duration()
    .prefault('5s')
    .meta({ description: "how often the apiserver's /metrics is read; rejections and latency are counted over each interval" }),
  timeout: duration().prefault('5s').meta({ description: 'a /metrics answer slower than this counts as none' }),
  maxInQueue: z
    .number()
    .int()
    .min(0)
    .default(50)
    .meta({ description: "violated when more requests than this wait in the priority levels' queues (API Priority and Fairness) at once" }),
  maxRejected: z
    .number()
    .int()
    .min(0)
    .default(0)
    .meta({ description: 'violated when the apiserver rejected (429) more requests than this in one interval' }),
  maxLatency: duration().prefault('1s').meta({
    description:
      "violated when the p99 latency of the interval's requests (but WATCH and CONNECT) is above this: the Kubernetes API call latency SLO",
  }),
  unreachable: z.enum(['violated', 'unknown']).default('unknown').meta({ description: 'what a /metrics that does not answer reads as' }),
});
type Params = z.output<typeof Params>;

/** One API Priority and Fairness priority level's requests. */
export interface PriorityLevelLoad {
  priorityLevel: string;
  executing: number;
  inQueue: number;
  /** Rejected in the last interval. */
  rejected: number;
}

export interface ApiserverLoadValue {
  levels: PriorityLevelLoad[];
  inQueue: number;
  rejected: number;
  /** p99 of the interval's requests but WATCH and CONNECT, in ms; null without any. */
  latencyP99Ms: number | null;
  /** Requests being served, by kind (apiserver_current_inflight_requests: readOnly, mutating). */
  inflight: Record<string, number>;
  error?: string;
}

const EXECUTING = 'apiserver_flowcontrol_current_executing_requests';
const IN_QUEUE = 'apiserver_flowcontrol_current_inqueue_requests';
const REJECTED = 'apiserver_flowcontrol_rejected_requests_total';
const INFLIGHT = 'apiserver_current_inflight_requests';
const LATENCY = 'apiserver_request_duration_seconds';
/** Long-running verbs: their duration is the stream's, not a request's. */
const STREAMING = new Set(['WATCH', 'CONNECT']);

/** The priority level a flow-control sample is of: `priority_level`, or `priorityLevel` before 1.23. */
const levelOf = (labels: Record<string, string>) => labels.priority_level ?? labels.priorityLevel ?? '';

/**
 * Load on the apiserver, from its own /metrics (no Prometheus needed): requests executing and waiting per priority
 * level of API Priority and Fairness, requests rejected, and request latency. Incident 002's masters were
 * overloaded long before nodes went NotReady: queues and latency say so first.
 */
export default defineProbe({
  meta: {
    access: [{ nonResourceURL: '/metrics', verbs: ['get'], why: "reads the apiserver's own metrics" }],
    id: 'apiserver-load',
    summary: "The apiserver's load from its /metrics: requests executing, queued and rejected per priority level, p99 latency.",
    description:
      'Reads the `/metrics` of the apiserver of the kubeconfig every `interval` (behind a load balancer, one member each ' +
      'time: the one that answers). Per API Priority and Fairness priority level: requests executing and waiting in ' +
      'its queues now, and rejected (429) during the interval; the p99 latency of the requests served during the ' +
      'interval, WATCH and CONNECT left out. Violated when more than `maxInQueue` wait, more than `maxRejected` were ' +
      'rejected, or the p99 is above `maxLatency`. The first reading has no interval behind it: it judges only the ' +
      'queues. PromQL equivalents, for a cluster whose Prometheus scrapes the apiservers: ' +
      '`sum by (priority_level) (apiserver_flowcontrol_current_inqueue_requests)`, ' +
      '`sum(increase(apiserver_flowcontrol_rejected_requests_total[5s]))`, ' +
      '`histogram_quantile(0.99, sum by (le) (rate(apiserver_request_duration_seconds_bucket{verb!~"WATCH|CONNECT"}[5s])))`.',
    params: Params,
  },
  start(ctx, params) {
    let before: { rejected: Map<string, number>; latency: Buckets } | undefined;
    return polled(
      ctx,
      params.interval,
      async () => {
        const r = await check(ctx, params, before);
        if (r.scrape) before = r.scrape;
        return r.reading;
      },
      (r) => `${r.status}|${r.detail.replace(/[\d.]+(ms|s)\b/g, '').replace(/\d+/g, '#')}`,
    );
  },
});

async function check(
  ctx: Ctx,
  params: Params,
  before: { rejected: Map<string, number>; latency: Buckets } | undefined,
): Promise<{ reading: Reading<ApiserverLoadValue>; scrape?: { rejected: Map<string, number>; latency: Buckets } }> {
  const at = ctx.clock.now();
  let text: string;
  try {
    const r = await ctx.kube.raw('/metrics', { timeoutMs: params.timeout, signal: ctx.signal });
    if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
    text = r.body;
  } catch (e) {
    const error = messageOf(e);
    return {
      reading: {
        status: params.unreachable,
        at,
        value: { levels: [], inQueue: 0, rejected: 0, latencyP99Ms: null, inflight: {}, error },
        detail: `cannot read the apiserver's /metrics: ${error}`,
      },
    };
  }
  const levels = new Map<string, PriorityLevelLoad>();
  const level = (name: string) => {
    let l = levels.get(name);
    if (!l) levels.set(name, (l = { priorityLevel: name, executing: 0, inQueue: 0, rejected: 0 }));
    return l;
  };
  for (const s of series(text, EXECUTING)) level(levelOf(s.labels)).executing += s.value;
  for (const s of series(text, IN_QUEUE)) level(levelOf(s.labels)).inQueue += s.value;
  const rejectedTotals = new Map<string, number>();
  for (const s of series(text, REJECTED)) rejectedTotals.set(levelOf(s.labels), (rejectedTotals.get(levelOf(s.labels)) ?? 0) + s.value);
  if (before)
    for (const [name, total] of rejectedTotals) {
      const d = total - (before.rejected.get(name) ?? 0);
      // a counter that went down was reset (the apiserver restarted, or another member answered): count it afresh
      level(name).rejected += d >= 0 ? d : total;
    }
  const latency = histogram(text, LATENCY, (l) => !STREAMING.has(l.verb ?? ''));
  const p99 = before ? quantile(0.99, delta(latency, before.latency)) : undefined;
  const inflight: Record<string, number> = {};
  for (const s of series(text, INFLIGHT)) inflight[s.labels.request_kind ?? s.labels.requestKind ?? ''] = s.value;

  const sorted = [...levels.values()].sort(
    (a, b) => b.inQueue - a.inQueue || b.rejected - a.rejected || a.priorityLevel.localeCompare(b.priorityLevel),
  );
  const inQueue = sorted.reduce((n, l) => n + l.inQueue, 0);
  const rejected = sorted.reduce((n, l) => n + l.rejected, 0);
  const latencyP99Ms = p99 === undefined ? null : Math.round(p99 * 1000);
  const problems: string[] = [];
  if (inQueue > params.maxInQueue) problems.push(`${inQueue} requests queued (more than ${params.maxInQueue})`);
  if (rejected > params.maxRejected)
    problems.push(`${rejected} rejected in ${formatDuration(params.interval)} (more than ${params.maxRejected})`);
  if (latencyP99Ms !== null && latencyP99Ms > params.maxLatency)
    problems.push(`p99 ${formatDuration(latencyP99Ms)} (slower than ${formatDuration(params.maxLatency)})`);
  const busiest = sorted
    .filter((l) => l.inQueue > 0 || l.rejected > 0)
    .slice(0, 3)
    .map((l) => `${l.priorityLevel}: ${l.executing} executing, ${l.inQueue} queued, ${l.rejected} rejected`);
  const summary = `${sorted.reduce((n, l) => n + l.executing, 0)} executing, ${inQueue} queued, ${rejected} rejected${latencyP99Ms === null ? '' : `, p99 ${formatDuration(latencyP99Ms)}`}`;
  return {
    reading: {
      status: problems.length ? 'violated' : 'ok',
      at,
      value: { levels: sorted, inQueue, rejected, latencyP99Ms, inflight },
      detail: [problems.length ? problems.join('; ') : summary, ...busiest].join('; '),
    },
    scrape: { rejected: rejectedTotals, latency },
  };
}
