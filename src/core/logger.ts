/** Structured logging for modules; the sink decides where lines go. Secrets are redacted (redact.ts) before any sink sees them. */
import { redact, redactText } from './redact.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export type LogSink = (level: LogLevel, msg: string, fields: Record<string, unknown>) => void;

export function createLogger(sink: LogSink, minLevel: LogLevel = 'info'): Logger {
  const order: LogLevel[] = ['debug', 'info', 'warn', 'error'];
  const min = order.indexOf(minLevel);
  const emit =
    (level: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      if (order.indexOf(level) < min) return;
      sink(level, redactText(msg), redact(fields) as Record<string, unknown>);
    };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

export const silentLogger: Logger = createLogger(() => {}, 'error');

/** A logger that keeps what it is told, for tests. */
export function memoryLogger(): Logger & { lines: { level: LogLevel; msg: string; fields: Record<string, unknown> }[] } {
  const lines: { level: LogLevel; msg: string; fields: Record<string, unknown> }[] = [];
  return Object.assign(
    createLogger((level, msg, fields) => lines.push({ level, msg, fields }), 'debug'),
    { lines },
  );
}
