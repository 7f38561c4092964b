import { redact } from '../core/redact.js';
import type { RunEvent, RunEventSink } from './events.js';

declare const redacted: unique symbol;

/**
 * A run event as sinks take it: passed through `redactEvent`, and only so. Every sink (the plain printer, the live
 * view, the report collector, telemetry) takes this type, so handing one a raw event does not compile.
 */
export type RedactedEvent = RunEvent & { readonly [redacted]: true };

/** Something that shows, keeps or sends run events: the console, a report, telemetry. */
export type RedactedSink = (e: RedactedEvent) => void;

/**
 * The event with every secret removed (src/core/redact.ts: tokens, keys, URL passwords in its text; values under
 * secret-looking keys in readings). The event itself when it held none.
 */
export function redactEvent(e: RunEvent): RedactedEvent {
  return redact(e, Infinity) as RedactedEvent;
}

/**
 * Where a run's events leave the engine: each is redacted once, then handed to every sink in order. Give the
 * engine's `emit` this, never a sink.
 */
export function toSinks(...sinks: (RedactedSink | undefined)[]): RunEventSink {
  const to = sinks.filter((s): s is RedactedSink => s !== undefined);
  return (e) => {
    const r = redactEvent(e);
    for (const sink of to) sink(r);
  };
}
