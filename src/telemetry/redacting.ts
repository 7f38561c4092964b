import type { Attributes, SpanStatus } from '@opentelemetry/api';
import type { PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { redact, redactText } from '../core/redact.js';

/**
 * The exporters' last pass, behind the run events' own redaction (src/engine/sinks.ts): whatever a span or a metric
 * carries that did not come from an event (a runbook's or step's name, the cluster's host, a future attribute)
 * leaves the process through src/core/redact.ts too. Span names, attributes, status messages, events and links,
 * and metric data points' attributes; a span is copied only when something in it changed.
 */
const attributes = (a: Attributes): Attributes => redact(a, Infinity) as Attributes;

const status = (s: SpanStatus): SpanStatus => (s.message === undefined ? s : { ...s, message: redactText(s.message) });

function redactSpan(span: ReadableSpan): ReadableSpan {
  const name = redactText(span.name);
  const attrs = attributes(span.attributes);
  const st = status(span.status);
  const events = span.events.map((e) => {
    const name = redactText(e.name);
    const attrs = e.attributes && attributes(e.attributes);
    return name === e.name && attrs === e.attributes ? e : { ...e, name, attributes: attrs };
  });
  const links = span.links.map((l) => {
    const attrs = l.attributes && attributes(l.attributes);
    return attrs === l.attributes ? l : { ...l, attributes: attrs };
  });
  const same =
    name === span.name &&
    attrs === span.attributes &&
    st.message === span.status.message &&
    events.every((e, i) => e === span.events[i]) &&
    links.every((l, i) => l === span.links[i]);
  if (same) return span;
  return {
    name,
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: st,
    attributes: attrs,
    links,
    events,
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

/** Every span redacted before `inner` sees it. */
export function redactingSpanExporter(inner: SpanExporter): SpanExporter {
  return {
    export: (spans, cb) => inner.export(spans.map(redactSpan), cb),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

function redactMetrics(m: ResourceMetrics): ResourceMetrics {
  return {
    ...m,
    scopeMetrics: m.scopeMetrics.map((sm) => ({
      ...sm,
      metrics: sm.metrics.map(
        (metric) =>
          ({
            ...metric,
            dataPoints: metric.dataPoints.map((dp) => {
              const attrs = attributes(dp.attributes);
              return attrs === dp.attributes ? dp : { ...dp, attributes: attrs };
            }),
          }) as typeof metric,
      ),
    })),
  };
}

/** Every data point's attributes redacted before `inner` sees them; its temporality and aggregation choices kept. */
export function redactingMetricExporter(inner: PushMetricExporter): PushMetricExporter {
  return {
    export: (metrics: ResourceMetrics, cb) => inner.export(redactMetrics(metrics), cb),
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    ...(inner.selectAggregationTemporality ? { selectAggregationTemporality: inner.selectAggregationTemporality.bind(inner) } : {}),
    ...(inner.selectAggregation ? { selectAggregation: inner.selectAggregation.bind(inner) } : {}),
  };
}
