import type { ExportResult } from '@opentelemetry/core';
import { ExportResultCode } from '@opentelemetry/core';
import type { PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/** Says the first thing that went wrong with the export, once: a collector that is down costs one line, not one per batch. */
export class WarnOnce {
  private said = false;
  constructor(private readonly warn: (line: string) => void) {}

  say(line: string): void {
    if (this.said) return;
    this.said = true;
    this.warn(line);
  }
}

type Failed = (result: ExportResult) => void;

const watched = (cb: (result: ExportResult) => void, failed: Failed) => (result: ExportResult) => {
  if (result.code !== ExportResultCode.SUCCESS) failed(result);
  cb(result);
};

/** The span exporter, its failures reported to `failed`. */
export function watchedSpanExporter(inner: SpanExporter, failed: Failed): SpanExporter {
  return {
    export: (spans: ReadableSpan[], cb) => inner.export(spans, watched(cb, failed)),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

/** The metric exporter, its failures reported to `failed`; its temporality and aggregation choices kept. */
export function watchedMetricExporter(inner: PushMetricExporter, failed: Failed): PushMetricExporter {
  return {
    export: (metrics: ResourceMetrics, cb) => inner.export(metrics, watched(cb, failed)),
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    ...(inner.selectAggregationTemporality ? { selectAggregationTemporality: inner.selectAggregationTemporality.bind(inner) } : {}),
    ...(inner.selectAggregation ? { selectAggregation: inner.selectAggregation.bind(inner) } : {}),
  };
}
