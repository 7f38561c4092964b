/** Structured logging for modules; the sink decides where lines go. Secrets are redacted before any sink sees them. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export type LogSink = (level: LogLevel, msg: string, fields: Record<string, unknown>) => void;

const SECRET_KEY = /token|password|secret|authorization|bearer|client-key|keydata/i;
const BEARER = /\b(Bearer\s+)[A-Za-z0-9._~+/=-]+/gi;
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/g;
/** A private key in PEM (PKCS#1, PKCS#8, encrypted, OpenSSH, EC), to its END line or, cut short, to the end of the text. */
const PEM_KEY = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g;
/** The password of a URL's `user:password@`. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*):[^\s/?#@]*@/gi;

/** Removes bearer tokens, JWTs, PEM private keys and URL passwords from free text. */
export function redactText(text: string): string {
  return text
    .replace(PEM_KEY, '-----BEGIN $1PRIVATE KEY-----[redacted]-----END $1PRIVATE KEY-----')
    .replace(BEARER, '$1[redacted]')
    .replace(JWT, '[redacted]')
    .replace(URL_PASSWORD, '$1:[redacted]@');
}

/** Deep copy with every string passed through redactText, keys and shape kept (for records read back later). */
export function redactStrings<T>(value: T): T {
  if (typeof value === 'string') return redactText(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => redactStrings(v)) as T;
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactStrings(v)])) as T;
  return value;
}

/**
 * Deep copy with values under secret-looking keys and token-looking strings removed; deeper than `maxDepth` is cut
 * (log fields: 8; reports are written whole).
 */
export function redact(value: unknown, maxDepth = 8, depth = 0): unknown {
  if (depth > maxDepth) return '[…]';
  if (typeof value === 'string') return redactText(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, maxDepth, depth + 1));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? '[redacted]' : redact(v, maxDepth, depth + 1);
    return out;
  }
  return value;
}

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
