import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { realClock } from '../core/clock.js';
import { FakeClock } from '../testing/fake-clock.js';
import type { RunEvent } from '../engine/events.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { toSinks } from '../engine/sinks.js';
import { type RunTelemetry, startTelemetry } from './telemetry.js';
import { otelSettings } from './settings.js';
import type { KrError } from '../core/errors.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An OTLP/HTTP receiver: keeps every request, answers 200 (the exporters send JSON). */
async function receiver(): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, got, close: () => new Promise((r) => server.close(() => r())) };
}

/** A receiver that takes every connection and never answers a request (a collector hung, a proxy stuck). */
async function silentReceiver(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server = createServer(() => void requests++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on. */
async function closedPort(): Promise<string> {
  const r = await receiver();
  await r.close();
  return r.url;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  arrayValue?: { values: OtlpValue[] };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: OtlpValue }[];
  events: { name: string; attributes: { key: string; value: OtlpValue }[] }[];
}

const plain = (v: OtlpValue): unknown =>
  v.arrayValue ? v.arrayValue.values.map(plain) : (v.stringValue ?? (v.intValue === undefined ? v.boolValue : Number(v.intValue)));
const attrs = (list: { key: string; value: OtlpValue }[]) => Object.fromEntries(list.map((a) => [a.key, plain(a.value)]));

const spansOf = (got: Received[]): OtlpSpan[] =>
  got
    .filter((r) => r.path === '/v1/traces')
    .flatMap((r) =>
      (JSON.parse(r.body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((rs) =>
        rs.scopeSpans.flatMap((ss) => ss.spans),
      ),
    );

const metricNames = (got: Received[]): string[] =>
  got
    .filter((r) => r.path === '/v1/metrics')
    .flatMap((r) =>
      (JSON.parse(r.body) as { resourceMetrics: { scopeMetrics: { metrics: { name: string }[] }[] }[] }).resourceMetrics.flatMap((rm) =>
        rm.scopeMetrics.flatMap((sm) => sm.metrics.map((m) => m.name)),
      ),
    );

/**
 * A run on the fake cluster: a step applies `cut` on node-1 and node-2, a guard fires while the run waits, the
 * rollback reverts both; an objective is measured after it.
 */
async function guardedRun(observe?: (e: RunEvent) => void) {
  const log: ActionRecord[] = [];
  const guard = new ScriptedProbe('pods', { status: 'ok', value: null, detail: 'no deletions' });
  const leases = new ScriptedProbe('leases', { status: 'ok', value: null, detail: 'all fresh' });
  const h = await startTestRun({
    runbook: baseRunbook({
      guards: [{ name: 'pods', probe: 'pods', onViolation: 'abort' }],
      steps: [
        { name: 'cut', action: 'cut', with: { nodes: { names: ['node-1', 'node-2'] } } },
        { name: 'hold', wait: '5m' },
      ],
      objectives: [{ name: 'leases fresh', probe: 'leases', within: '1m' }],
    }),
    actions: [recordingAction('cut', log)],
    probes: [guard.probe, leases.probe],
    observe,
  });
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'step-start' && e.name === 'hold'));
  guard.push('violated', '1 pod deleted: default/web-1', h.clock.now());
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
  return { h, result: await h.handle.result };
}

describe('OpenTelemetry export of a run', () => {
  let telemetry: RunTelemetry | undefined;
  afterEach(async () => {
    await telemetry?.shutdown();
    telemetry = undefined;
    vi.unstubAllEnvs();
  });

  it('sends one trace whose span tree is the run, with its attributes and no secret, and its metrics', async () => {
    const r = await receiver();
    vi.stubEnv('OTEL_EXPORTER_OTLP_HEADERS', 'authorization=Bearer s3cret-otlp-token');
    const warnings: string[] = [];
    telemetry = startTelemetry({
      // the receiver is plain http on this machine: the headers go there only because this allows it
      settings: otelSettings(process.env, { endpoint: r.url, headersOverHttp: true })!,
      target: { clusterHost: 'fake.invalid:6443', nodes: ['cp-1', 'node-1', 'node-2', 'node-3'] },
      clock: realClock,
      warn: (l) => warnings.push(l),
    });
    const { result } = await guardedRun(toSinks(telemetry.onEvent));
    expect(result.status).toBe('aborted');
    await telemetry.shutdown();
    await r.close();

    expect(warnings).toEqual([]);
    const spans = spansOf(r.got);
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
    const [root, ...others] = spans.filter((s) => !s.parentSpanId);
    expect(others).toEqual([]);
    expect(root!.name).toBe('run test');
    expect(attrs(root!.attributes)).toMatchObject({
      'kube_runbook.run.id': 'run-test',
      'kube_runbook.runbook': 'test',
      'kube_runbook.context': 'lab',
      'kube_runbook.cluster': 'fake.invalid:6443',
      'kube_runbook.nodes': ['cp-1', 'node-1', 'node-2', 'node-3'],
      'kube_runbook.status': 'aborted',
    });
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const tree = spans
      .filter((s) => s.parentSpanId)
      .map(
        (s) =>
          `${byId.get(s.parentSpanId!)!.name} > ${s.name}${attrs(s.attributes)['k8s.node.name'] ? ` @${String(attrs(s.attributes)['k8s.node.name'])}` : ''}`,
      )
      .sort();
    expect(tree).toEqual(
      [
        'run test > step cut',
        'run test > step hold',
        'step cut > apply cut @node-1',
        'step cut > apply cut @node-2',
        'run test > rollback',
        'rollback > revert cut @node-1',
        'rollback > revert cut @node-2',
      ].sort(),
    );
    const fired = root!.events.find((e) => e.name === 'guard fired');
    expect(attrs(fired!.attributes)).toMatchObject({
      'kube_runbook.guard': 'pods',
      'kube_runbook.guard.response': 'abort',
      'kube_runbook.reading.status': 'violated',
      'kube_runbook.reading.detail': '1 pod deleted: default/web-1',
    });
    expect(root!.events.map((e) => e.name)).toEqual(expect.arrayContaining(['objective start', 'objective met']));

    // the headers went to the receiver, never into what it received
    const traces = r.got.find((g) => g.path === '/v1/traces')!;
    expect(traces.headers.authorization).toBe('Bearer s3cret-otlp-token');
    for (const g of r.got) expect(g.body).not.toContain('s3cret');

    expect(metricNames(r.got)).toEqual(
      expect.arrayContaining([
        'kube_runbook.faults.applied',
        'kube_runbook.faults.reverted',
        'kube_runbook.guard.readings',
        'kube_runbook.guard.firings',
        'kube_runbook.objective.recovery',
      ]),
    );
  });

  it('a receiver that is down costs one warning and changes nothing of the run', async () => {
    const without = await guardedRun();
    const warnings: string[] = [];
    const url = await closedPort();
    telemetry = startTelemetry({
      settings: otelSettings({}, { endpoint: url })!,
      target: { nodes: ['node-1'] },
      clock: realClock,
      warn: (l) => warnings.push(l),
    });
    const withDown = await guardedRun(toSinks(telemetry.onEvent));
    await telemetry.shutdown();
    expect(withDown.result.exitCode).toBe(without.result.exitCode);
    expect(withDown.result.status).toBe(without.result.status);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(url);
  });
});

describe('the end of a run whose collector never answers', () => {
  it('waits FLUSH_DEADLINE_MS (5 s) on the run clock for the last spans, no longer, then says so once', async () => {
    const silent = await silentReceiver();
    const warnings: string[] = [];
    const clock = new FakeClock();
    const t = startTelemetry({
      settings: otelSettings({}, { endpoint: silent.url })!,
      target: { nodes: ['node-1'] },
      clock,
      warn: (l) => warnings.push(l),
    });
    try {
      const without = await guardedRun();
      const withSilent = await guardedRun(toSinks(t.onEvent));
      expect(withSilent.result.exitCode, 'the run is not held up by its telemetry').toBe(without.result.exitCode);
      let ended = false;
      const shutdown = t.shutdown().then(() => (ended = true));
      // the collector has the batch and holds it: the end of the run waits for it, on the clock
      await vi.waitFor(() => expect(silent.requests()).toBeGreaterThan(0), { timeout: 10_000 });
      await clock.advance(4_900);
      expect(ended, 'ended before the deadline').toBe(false);
      await clock.advance(200);
      await shutdown;
      expect(ended).toBe(true);
      expect(warnings).toEqual([expect.stringMatching(/telemetry was not all sent to http:\/\/127\.0\.0\.1:\d+ within 5s$/)]);
    } finally {
      await silent.close();
    }
  });
});

describe('otelSettings', () => {
  it('is off without an endpoint, on with the standard variables, and the flag wins', () => {
    expect(otelSettings({})).toBeUndefined();
    expect(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(otelSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://u:p@c:4318/v1/traces?key=k' })).toEqual({
      shownAs: 'https://c:4318/v1/traces',
    });
    expect(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' }, { endpoint: 'http://flag:4318/' })).toEqual({
      tracesUrl: 'http://flag:4318/v1/traces',
      metricsUrl: 'http://flag:4318/v1/metrics',
      shownAs: 'http://flag:4318',
    });
  });

  it('refuses OTLP headers or a URL password over plain http unless allowed, naming the endpoint without its secret', () => {
    const refused = (env: NodeJS.ProcessEnv, o: Parameters<typeof otelSettings>[1] = {}) => {
      try {
        otelSettings(env, o);
      } catch (e) {
        return e as KrError;
      }
      return undefined;
    };
    const headers = { OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer s3cret' };
    const e = refused({ ...headers, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.example:4318' });
    expect(e).toMatchObject({ code: 'OTEL_CREDENTIALS_OVER_HTTP', exit: 2 });
    expect(e?.message).toBe(
      "the run's traces would go to http://collector.example:4318/v1/traces over plain http with OTEL_EXPORTER_OTLP_HEADERS, " +
        'which anyone on the path can read: use an https:// endpoint, or pass --otel-headers-over-http for a collector on a link you trust',
    );
    // the flag's endpoint; one signal's own headers, to the default endpoint of the other; a URL's password
    expect(refused(headers, { endpoint: 'http://c:4318' })?.message).toContain('to http://c:4318/v1/traces over plain http');
    expect(
      refused({ OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'x-api-key=k', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c/v1/traces' })?.message,
    ).toContain("the run's metrics would go to http://localhost:4318/v1/metrics over plain http with OTEL_EXPORTER_OTLP_METRICS_HEADERS");
    const password = refused({}, { endpoint: 'http://u:pw@c:4318' });
    expect(password?.message).toContain("to http://c:4318/v1/traces over plain http with the URL's user:password@");
    expect(password?.message).not.toContain('pw');
    // https, no credentials, or allowed
    expect(refused({ ...headers, OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c:4318' })).toBeUndefined();
    expect(refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeUndefined();
    expect(refused(headers, { endpoint: 'http://c:4318', headersOverHttp: true })).toBeUndefined();
  });

  it('checks only the signals a sender sends, naming whose they are', () => {
    const mcp = { signals: ['traces'] as const, whose: "the MCP server's" };
    const metricsOnly = { OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'x-api-key=k', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(otelSettings(metricsOnly, mcp)).toEqual({ shownAs: 'http://c:4318' });
    expect(() =>
      otelSettings({ OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer s3cret' }, { ...mcp, endpoint: 'http://c:4318' }),
    ).toThrow("the MCP server's traces would go to http://c:4318/v1/traces over plain http with OTEL_EXPORTER_OTLP_HEADERS");
  });

  it('names a bad --otel-endpoint and exits 2', () => {
    expect(() => otelSettings({}, { endpoint: 'collector:4318' })).toThrow(
      expect.objectContaining({ code: 'OTEL_ENDPOINT_INVALID', exit: 2 }),
    );
    expect(() => otelSettings({}, { endpoint: 'not a url' })).toThrow(/--otel-endpoint "not a url": not a URL/);
  });
});
