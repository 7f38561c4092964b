import { type Attributes, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Clock } from '../core/clock.js';
import { messageOf } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { toolVersion } from '../core/version.js';
import type { OtelSettings } from './settings.js';
import { batchedSpans, flushedWithin, serviceResource } from './telemetry.js';
import { WarnOnce } from './warn-once.js';

/** One request a server answered (an MCP tool call, a resource read), as one span of its own. */
export interface FinishedCall {
  /** The span's name: `mcp.tool halt`. */
  name: string;
  /** Epoch milliseconds. */
  startMs: number;
  endMs: number;
  attributes: Attributes;
  /** Set the span's status to error, with this message (a failure, not a refusal). */
  error?: string;
}

export interface CallTelemetry {
  /** Queues the call's span; never throws, never waits. */
  onCall(c: FinishedCall): void;
  /** Sends what is left, within the flush deadline; never throws. */
  shutdown(): Promise<void>;
}

export interface CallTelemetryOptions {
  settings: OtelSettings;
  clock: Clock;
  /** One line on stderr: said at most once while the server runs. */
  warn: (line: string) => void;
  /** Where spans go: OTLP/HTTP to the settings' endpoint unless given. */
  exporter?: SpanExporter;
}

/**
 * A long-running server's calls as spans over OTLP/HTTP, one root span per call, through the same pipeline as a run's
 * trace (telemetry.ts): redacted once more at export, batched with a bounded queue, a collector that is down or
 * refuses costing one warning, never a call's time or its answer.
 */
export function startCallTelemetry(o: CallTelemetryOptions): CallTelemetry {
  const once = new WarnOnce((line) => o.warn(redactText(line)));
  let traces: BasicTracerProvider;
  try {
    traces = new BasicTracerProvider({
      resource: serviceResource(),
      spanProcessors: [
        batchedSpans(o.settings, o.exporter, (r) =>
          once.say(
            `kube-runbook: warning: the MCP calls' telemetry could not be sent to ${o.settings.shownAs}: ` +
              `${r.error ? messageOf(r.error) : 'export failed'} (the server goes on; no further telemetry warnings)`,
          ),
        ),
      ],
    });
  } catch (e) {
    once.say(`kube-runbook: warning: the MCP calls' telemetry is off: ${messageOf(e)}`);
    return { onCall: () => undefined, shutdown: () => Promise.resolve() };
  }
  const tracer = traces.getTracer('kube-runbook', toolVersion());
  let broken = false;
  return {
    onCall(c) {
      if (broken) return;
      try {
        const span = tracer.startSpan(c.name, { startTime: c.startMs, attributes: c.attributes, root: true });
        if (c.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: c.error });
        span.end(c.endMs);
      } catch (err) {
        broken = true;
        once.say(`kube-runbook: warning: the MCP calls' telemetry stopped: ${messageOf(err)}`);
      }
    },
    async shutdown() {
      if (!(await flushedWithin(o.clock, [traces.shutdown()])))
        once.say(`kube-runbook: warning: the MCP calls' telemetry was not all sent to ${o.settings.shownAs} in time`);
    },
  };
}
