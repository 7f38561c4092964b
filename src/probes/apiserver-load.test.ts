import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type ApiserverLoadValue } from './apiserver-load.js';

let t: ProbeTester;
afterEach(async () => t.close());

/** An apiserver's /metrics as 1.37 writes it (and 1.20, with camelCase labels), with the figures the test sets. */
function metrics(o: { queued?: number; rejected?: number; slow?: number; fast?: number; watches?: number; camel?: boolean }): string {
  const pl = o.camel ? 'priorityLevel' : 'priority_level';
  const fs = o.camel ? 'flowSchema' : 'flow_schema';
  const bucket = (verb: string, le: string, n: number) =>
    `apiserver_request_duration_seconds_bucket{component="apiserver",verb="${verb}",resource="pods",le="${le}"} ${n}`;
  const fast = o.fast ?? 0;
  const slow = o.slow ?? 0;
  const watches = o.watches ?? 0;
  return [
    '# HELP apiserver_flowcontrol_current_executing_requests [BETA] Number of requests in initial or execution stage',
    '# TYPE apiserver_flowcontrol_current_executing_requests gauge',
    `apiserver_flowcontrol_current_executing_requests{${fs}="workload-low",${pl}="workload-low"} 4`,
    `apiserver_flowcontrol_current_executing_requests{${fs}="system-nodes",${pl}="system"} 2`,
    `apiserver_flowcontrol_current_inqueue_requests{${fs}="workload-low",${pl}="workload-low"} ${o.queued ?? 0}`,
    `apiserver_flowcontrol_current_inqueue_requests{${fs}="system-nodes",${pl}="system"} 0`,
    `apiserver_flowcontrol_rejected_requests_total{${fs}="workload-low",${pl}="workload-low",reason="queue-full"} ${o.rejected ?? 0}`,
    'apiserver_current_inflight_requests{request_kind="mutating"} 1',
    'apiserver_current_inflight_requests{request_kind="readOnly"} 5',
    bucket('GET', '0.1', fast),
    bucket('GET', '1', fast),
    bucket('GET', '5', fast + slow),
    bucket('GET', '+Inf', fast + slow),
    // a watch lasts as long as its stream: never counted
    bucket('WATCH', '0.1', 0),
    bucket('WATCH', '1', 0),
    bucket('WATCH', '5', 0),
    bucket('WATCH', '+Inf', watches),
    '',
  ].join('\n');
}

describe('apiserver-load', () => {
  it('is ok under light load; violated on queued requests, rejections in an interval and a slow p99; WATCH never counts', async () => {
    t = new ProbeTester();
    let m = { fast: 100, watches: 50 } as Parameters<typeof metrics>[0];
    t.kube.rawHandler = (path) => (path === '/metrics' ? { status: 200, body: metrics(m) } : { status: 404, body: '' });
    const run = t.start(probe, { interval: '5s' });
    const first = await run.until((r) => r.status === 'ok');
    expect(first.detail).toBe('6 executing, 0 queued, 0 rejected');
    expect(first.value).toMatchObject({
      inQueue: 0,
      rejected: 0,
      latencyP99Ms: null,
      inflight: { mutating: 1, readOnly: 5 },
    } satisfies Partial<ApiserverLoadValue>);

    // 200 more fast requests and many more watches ending: p99 within the fast bucket
    m = { fast: 300, watches: 5000 };
    const fastAgain = await run.until((r) => (r.value as ApiserverLoadValue).latencyP99Ms !== null, 10_000);
    expect(fastAgain.status).toBe('ok');
    expect((fastAgain.value as ApiserverLoadValue).latencyP99Ms).toBeLessThanOrEqual(100);

    m = { fast: 300, queued: 80, watches: 5000 };
    const queued = await run.until((r) => r.status === 'violated', 10_000);
    expect(queued.detail).toBe('80 requests queued (more than 50); workload-low: 4 executing, 80 queued, 0 rejected');

    m = { fast: 300, rejected: 7, watches: 5000 };
    const rejected = await run.until((r) => r.detail.includes('rejected in'), 10_000);
    expect(rejected.detail).toBe('7 rejected in 5s (more than 0); workload-low: 4 executing, 0 queued, 7 rejected');
    // the counter stays: nothing more rejected in the next interval
    await run.until((r) => r.status === 'ok', 10_000);

    m = { fast: 300, slow: 50, rejected: 7, watches: 9000 };
    const slow = await run.until((r) => r.status === 'violated', 10_000);
    // 50 requests between 1 s and 5 s: the 99th percentile 4.96 s into that bucket, as histogram_quantile puts it
    expect((slow.value as ApiserverLoadValue).latencyP99Ms).toBe(4960);
    expect(slow.detail).toBe('p99 5.0s (slower than 1s)');
  });

  it('reads 1.20 metrics (camelCase labels) and an apiserver whose /metrics does not answer as unknown', async () => {
    t = new ProbeTester();
    let up = true;
    t.kube.rawHandler = () => (up ? { status: 200, body: metrics({ queued: 60, camel: true }) } : { status: 403, body: 'forbidden' });
    const run = t.start(probe, {});
    const v = await run.until((r) => r.status === 'violated');
    expect((v.value as ApiserverLoadValue).levels[0]).toEqual({ priorityLevel: 'workload-low', executing: 4, inQueue: 60, rejected: 0 });
    up = false;
    const u = await run.until((r) => r.status === 'unknown', 10_000);
    expect(u.detail).toBe("cannot read the apiserver's /metrics: /metrics answered 403");
  });

  it('refuses a negative queue bound', () => {
    expect(probe.meta.params.safeParse({ maxInQueue: -1 }).success).toBe(false);
  });
});
