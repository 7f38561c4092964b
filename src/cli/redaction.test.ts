import type { Attributes } from '@opentelemetry/api';
import { InMemoryMetricExporter, AggregationTemporality } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { realClock } from '../core/clock.js';
import type { RunEvent } from '../engine/events.js';
import { type RedactedEvent, toSinks } from '../engine/sinks.js';
import { ReportCollector } from '../report/collect.js';
import { plainRenderer } from '../report/plain.js';
import { startTelemetry } from '../telemetry/telemetry.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { runCli } from './main.js';

const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJrdWJlLXJ1bmJvb2sifQ.c2lnbmF0dXJlLXMzY3JldA';
const KEY_LINE = 'MIIEowIBAAKCAQEAs3cr3tK3yB0dyOfAPr1vateKey';
const PEM = `-----BEGIN RSA PRIVATE KEY-----\n${KEY_LINE}\n-----END RSA PRIVATE KEY-----`;
/** What must never come out, whatever the sink. */
const SECRETS = ['s3cret-pass', 'c2lnbmF0dXJlLXMzY3JldA', KEY_LINE, 'k3y-0f-api'];
const PROM = 'https://kr:s3cret-pass@prom:9090';
/** A PromQL probe's error as a Prometheus behind a proxy might give it: the URL with its password, the token sent, a key. */
const ERROR = `cannot query ${PROM}/api/v1/query: 401 (Authorization: Bearer ${JWT}); proxy said: ${PEM}`;
/** A guard named after its Prometheus: the name is a metric label and a span attribute. */
const GUARD = `prometheus at ${PROM}`;

/** Spans as a receiver would read them: names, attributes, status messages, events. */
const spanText = (spans: ReadableSpan[]) =>
  JSON.stringify(
    spans.map((s) => ({
      name: s.name,
      attributes: s.attributes,
      status: s.status,
      events: s.events.map((e) => ({ name: e.name, attributes: e.attributes })),
    })),
  );

/** The SDK's in-memory exporter, keeping what it got past the provider's shutdown. */
class KeptSpans extends InMemorySpanExporter {
  override shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function telemetryInMemory() {
  const spans = new KeptSpans();
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const telemetry = startTelemetry({
    settings: { shownAs: 'memory' },
    target: { clusterHost: 'fake.invalid:6443', nodes: ['node-1'] },
    clock: realClock,
    warn: () => undefined,
    exporters: { spans, metrics },
  });
  const metricText = () =>
    JSON.stringify(
      metrics
        .getMetrics()
        .flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics.flatMap((m) => m.dataPoints.map((dp) => dp.attributes as Attributes)))),
    );
  return { telemetry, spanText: () => spanText(spans.getFinishedSpans()), metricText };
}

/** A run whose guard reads its Prometheus unreachable with ERROR and aborts it: the secrets travel in many events. */
async function runWithSecrets(observe: (e: RunEvent) => void) {
  const guard = new ScriptedProbe('prom', { status: 'ok', value: null, detail: 'up' });
  const h = await startTestRun({
    runbook: baseRunbook({
      guards: [{ name: GUARD, probe: 'prom', onViolation: 'abort' }],
      steps: [
        { name: 'cut', action: 'cut', with: { nodes: { names: ['node-1'] } } },
        { name: 'hold', wait: '5m' },
      ],
    }),
    actions: [recordingAction('cut', [])],
    probes: [guard.probe],
    observe,
  });
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'step-start' && e.name === 'hold'));
  guard.push('violated', ERROR, h.clock.now(), { error: ERROR, request: { headers: { 'x-api-key': 'k3y-0f-api' } } });
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
  const result = await h.handle.result;
  return { h, result };
}

const expectNoSecret = (what: string, text: string) => {
  for (const s of SECRETS) expect(text, `${what} holds ${s}`).not.toContain(s);
};

describe('every sink takes run events through the one redaction point', () => {
  it('a run whose events carry a URL password, a bearer JWT and a PEM key prints, reports and exports them redacted', async () => {
    const lines: string[] = [];
    const collector = new ReportCollector();
    const otel = telemetryInMemory();
    const raw: RunEvent[] = [];
    const sinks = toSinks(
      collector.onEvent,
      plainRenderer((l) => lines.push(l)),
      otel.telemetry.onEvent,
    );
    const { result } = await runWithSecrets((e) => {
      raw.push(e);
      sinks(e);
    });
    await otel.telemetry.shutdown();
    expect(result.status).toBe('aborted');
    // the secrets were there to leak: in the events the engine gave
    const rawText = JSON.stringify(raw);
    for (const s of SECRETS) expect(rawText).toContain(s);

    const console = lines.join('\n');
    expectNoSecret('the console', console);
    expect(console).toContain(
      `guard ${GUARD.replace('s3cret-pass', '[redacted]')}: violated — cannot query https://kr:[redacted]@prom:9090`,
    );
    expect(console).toContain('Authorization: Bearer [redacted]');
    expect(console).toContain('-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----');

    const spans = otel.spanText();
    expectNoSecret('the spans', spans);
    expect(spans).toContain('https://kr:[redacted]@prom:9090');
    expect(spans).toMatch(/"kube_runbook.reading.detail":"cannot query https:\/\/kr:\[redacted\]@prom:9090\/api\/v1\/query: 401/);
    const metrics = otel.metricText();
    expectNoSecret('the metrics', metrics);
    expect(metrics).toContain('"kube_runbook.guard":"prometheus at https://kr:[redacted]@prom:9090"');

    expectNoSecret('the report', JSON.stringify(collector.report));
  });

  it('the telemetry exporters redact what reaches them even from events that skipped it', async () => {
    const otel = telemetryInMemory();
    // as a sink wired around toSinks would hand them on
    await runWithSecrets((e) => otel.telemetry.onEvent(e as RedactedEvent));
    await otel.telemetry.shutdown();
    const spans = otel.spanText();
    expect(spans).toContain('"kube_runbook.guard":"prometheus at https://kr:[redacted]@prom:9090"');
    expect(spans).toContain('Bearer [redacted]');
    expectNoSecret('the spans', spans);
    expectNoSecret('the metrics', otel.metricText());
  });

  it('a sink does not take a raw event', () => {
    const lines: string[] = [];
    const event: RunEvent = { type: 'log', at: 0, level: 'warn', message: `GET ${PROM}/` };
    // @ts-expect-error a sink takes only what toSinks (redactEvent) gives
    plainRenderer((l) => lines.push(l))(event);
    toSinks(plainRenderer((l) => lines.push(l)))(event);
    expect(lines).toEqual([`00:00:00.000 warn: GET ${PROM}/`, '00:00:00.000 warn: GET https://kr:[redacted]@prom:9090/']);
  });
});

describe('kube-runbook run --otel-endpoint', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it('refuses OTLP headers over plain http with exit 2 before reading the runbook, and takes them with --otel-headers-over-http', async () => {
    vi.stubEnv('OTEL_EXPORTER_OTLP_HEADERS', 'authorization=Bearer s3cret-otlp');
    const stderr: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((s) => stderr.push(String(s)) > 0);
    const args = ['node', 'kube-runbook', 'run', 'no-such-runbook.yaml', '--otel-endpoint', 'http://collector.example:4318'];
    expect(await runCli(args)).toBe(2);
    expect(stderr.join('')).toBe(
      "kube-runbook: the run's traces would go to http://collector.example:4318/v1/traces over plain http with OTEL_EXPORTER_OTLP_HEADERS, " +
        'which anyone on the path can read: use an https:// endpoint, or pass --otel-headers-over-http for a collector on a link you trust ' +
        '[OTEL_CREDENTIALS_OVER_HTTP]\n',
    );
    // allowed, the run goes on to its inventory and runbook (which are not there)
    stderr.length = 0;
    await runCli([...args, '--otel-headers-over-http']);
    expect(stderr.join('')).toMatch(/^kube-runbook: /);
    expect(stderr.join('')).not.toContain('OTEL_CREDENTIALS_OVER_HTTP');
  });
});
