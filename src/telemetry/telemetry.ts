import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import type { Attributes } from '@opentelemetry/api';
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Clock } from '../core/clock.js';
import { messageOf } from '../core/errors.js';
import { redact, redactText } from '../core/redact.js';
import { toolVersion } from '../core/version.js';
import type { RedactedEvent } from '../engine/sinks.js';
import { redactingMetricExporter, redactingSpanExporter } from './redacting.js';
import { RunMetrics } from './run-metrics.js';
import { RunTrace, type RunTarget } from './run-trace.js';
import type { OtelSettings } from './settings.js';
import { WarnOnce, watchedMetricExporter, watchedSpanExporter } from './warn-once.js';

/** How long the end of a run waits for the last spans and metrics to leave. */
const FLUSH_DEADLINE_MS = 5_000;
/** One request's bound: a collector that does not answer costs at most this, retries included. */
const EXPORT_TIMEOUT_MS = 4_000;
/** Spans wait here for the next batch; past it new spans are dropped, never the run slowed. */
const MAX_QUEUE = 2_048;
const METRIC_INTERVAL_MS = 10_000;

export interface RunTelemetry {
  /** Takes every run event; never throws, never waits. */
  onEvent(e: RedactedEvent): void;
  /** Sends what is left, within FLUSH_DEADLINE_MS; never throws. */
  shutdown(): Promise<void>;
}

export interface TelemetryOptions {
  settings: OtelSettings;
  target: RunTarget;
  clock: Clock;
  /** One line on stderr: said at most once per run. */
  warn: (line: string) => void;
  /** Where spans and metrics go: OTLP/HTTP to the settings' endpoint unless given (tests give in-memory ones). */
  exporters?: { spans: SpanExporter; metrics: PushMetricExporter };
}

/**
 * The run's trace and metrics over OTLP/HTTP, by the OpenTelemetry JS SDK: spans through a BatchSpanProcessor with a
 * bounded queue, metrics through a periodic reader, both flushed at the end. A collector that is down or refuses
 * costs one warning; nothing here changes the run or its exit code. Events come redacted (src/engine/sinks.ts);
 * the exporters redact every span and data point once more before they leave (redacting.ts), and the resource and
 * warnings are redacted too.
 */
/** The service as every span and metric names it (`service.name`, its version, `OTEL_RESOURCE_ATTRIBUTES`), redacted. */
export function serviceResource() {
  const detected = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'kube-runbook', 'service.version': toolVersion() }))
    .merge(detectResources({ detectors: [envDetector] }));
  return resourceFromAttributes(redact(detected.attributes, Infinity) as Attributes);
}

/**
 * Spans to OTLP/HTTP at the settings' endpoint (or to `exporter`), redacted (redacting.ts), failures to `failed`,
 * batched with a bounded queue: a collector slow or down drops spans, it never holds up who made them.
 */
export function batchedSpans(settings: OtelSettings, exporter: SpanExporter | undefined, failed: (r: { error?: Error }) => void) {
  const spans =
    exporter ?? new OTLPTraceExporter({ ...(settings.tracesUrl ? { url: settings.tracesUrl } : {}), timeoutMillis: EXPORT_TIMEOUT_MS });
  return new BatchSpanProcessor(watchedSpanExporter(redactingSpanExporter(spans), failed), {
    maxQueueSize: MAX_QUEUE,
    maxExportBatchSize: 512,
    scheduledDelayMillis: 1_000,
    exportTimeoutMillis: EXPORT_TIMEOUT_MS,
  });
}

/** Whether `work` (the providers' shutdowns) settled within FLUSH_DEADLINE_MS on `clock`. */
export async function flushedWithin(clock: Clock, work: Promise<unknown>[]): Promise<boolean> {
  const stop = new AbortController();
  const flushed = Promise.allSettled(work).then(() => true);
  const late = clock.sleep(FLUSH_DEADLINE_MS, stop.signal).then(
    () => false,
    () => true,
  );
  const inTime = await Promise.race([flushed, late]);
  stop.abort();
  return inTime;
}

export function startTelemetry(o: TelemetryOptions): RunTelemetry {
  const once = new WarnOnce((line) => o.warn(redactText(line)));
  try {
    return exporting(o, once);
  } catch (e) {
    // a setting the SDK refuses: the run goes on without telemetry
    once.say(`kube-runbook: warning: the run's telemetry is off: ${messageOf(e)}`);
    return { onEvent: () => undefined, shutdown: () => Promise.resolve() };
  }
}

function exporting(o: TelemetryOptions, once: WarnOnce): RunTelemetry {
  const failed = (what: string) => (r: { error?: Error }) =>
    once.say(
      `kube-runbook: warning: the run's telemetry (${what}) could not be sent to ${o.settings.shownAs}: ${r.error ? messageOf(r.error) : 'export failed'} ` +
        '(the run goes on; no further telemetry warnings)',
    );
  const resource = serviceResource();
  const metricExporter =
    o.exporters?.metrics ??
    new OTLPMetricExporter({ ...(o.settings.metricsUrl ? { url: o.settings.metricsUrl } : {}), timeoutMillis: EXPORT_TIMEOUT_MS });
  const traces = new BasicTracerProvider({
    resource,
    spanProcessors: [batchedSpans(o.settings, o.exporters?.spans, failed('trace'))],
  });
  const metrics = new MeterProvider({
    resource,
    readers: [
      new PeriodicExportingMetricReader({
        exporter: watchedMetricExporter(redactingMetricExporter(metricExporter), failed('metrics')),
        exportIntervalMillis: METRIC_INTERVAL_MS,
        exportTimeoutMillis: EXPORT_TIMEOUT_MS,
      }),
    ],
  });
  const sinks = [
    new RunTrace(traces.getTracer('kube-runbook', toolVersion()), o.target).onEvent,
    new RunMetrics(metrics.getMeter('kube-runbook', toolVersion())).onEvent,
  ];
  let broken = false;
  return {
    onEvent(e) {
      if (broken) return;
      try {
        for (const sink of sinks) sink(e);
      } catch (err) {
        // telemetry never changes a run: a failure here ends the telemetry, not the run
        broken = true;
        once.say(`kube-runbook: warning: the run's telemetry stopped: ${messageOf(err)}`);
      }
    },
    async shutdown() {
      if (!(await flushedWithin(o.clock, [traces.shutdown(), metrics.shutdown()])))
        once.say(
          `kube-runbook: warning: the run's telemetry was not all sent to ${o.settings.shownAs} within ${FLUSH_DEADLINE_MS / 1000}s`,
        );
    },
  };
}
