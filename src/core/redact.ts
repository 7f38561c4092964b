/**
 * The one place that says what a secret looks like. Everything the tool writes passes through it: log lines
 * (logger.ts), the journal, run events before any sink sees them (console, live view, reports, telemetry), the
 * telemetry exporters' last pass, and error messages on stderr.
 */

/** Keys whose values are dropped from structured data (log fields, reports, run events). */
const SECRET_KEY = /token|password|secret|authorization|bearer|client-key|keydata|api[-_]?key|cookie|private[-_]?key/i;
const BEARER = /\b(Bearer\s+)[A-Za-z0-9._~+/=-]+/gi;
const JWT = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/g;
/** A private key in PEM (PKCS#1, PKCS#8, encrypted, OpenSSH, EC), to its END line or, cut short, to the end of the text. */
const PEM_KEY = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g;
/** The password of a URL's `user:password@`. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*):[^\s/?#@]*@/gi;
/**
 * An Authorization header's credentials after its scheme (`Authorization: Basic dXNlcjpw`), as a header, in JSON or
 * as OTEL_EXPORTER_OTLP_HEADERS writes it (`authorization=Basic%20dXNl`).
 */
const AUTH_HEADER =
  /\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:basic|bearer|digest|negotiate|token|apikey)(?:\s+|%20))[A-Za-z0-9._~+/=%-]+/gi;
/** Headers whose whole value is a credential (`X-Api-Key: ...`, `Cookie: ...`). */
const SECRET_HEADER = /\b((?:x-)?api-?key|x-auth-token|private-token|x-vault-token|(?:set-)?cookie)(["']?\s*[:=]\s*["']?)[^\s"',]+/gi;
/** A query parameter that carries a credential (`?access_token=...`, `&api_key=...`, `&X-Amz-Signature=...`). */
const SECRET_PARAM =
  /([?&;](?:[a-z0-9_.-]*(?:token|secret|password|passwd|api[_-]?key|signature|credential)|key|sig|pwd|auth)=)[^&#\s"']+/gi;
/**
 * Cheap tests before the rules: every rule needs a space, a dot, a colon or an equals sign (a node name, a status,
 * a number does not have one), and one of these words or signs.
 */
const PUNCTUATED = /[\s.:=]/;
const MAYBE =
  /bearer|eyJ|PRIVATE KEY|:\/\/[^\s/?#@]*:[^\s/?#@]*@|authorization|api-?key|auth-token|private-token|vault-token|cookie|[?&;][^=\s]*=/i;

const REDACTED = '[redacted]';

/**
 * Removes bearer tokens, JWTs, PEM private keys, URL passwords, Authorization credentials, API-key and cookie
 * headers and credential query parameters from free text. Applying it twice changes nothing more.
 */
export function redactText(text: string): string {
  if (!PUNCTUATED.test(text) || !MAYBE.test(text)) return text;
  return text
    .replace(PEM_KEY, `-----BEGIN $1PRIVATE KEY-----${REDACTED}-----END $1PRIVATE KEY-----`)
    .replace(AUTH_HEADER, `$1${REDACTED}`)
    .replace(BEARER, `$1${REDACTED}`)
    .replace(JWT, REDACTED)
    .replace(URL_PASSWORD, `$1:${REDACTED}@`)
    .replace(SECRET_HEADER, `$1$2${REDACTED}`)
    .replace(SECRET_PARAM, `$1${REDACTED}`);
}

/** Whether a key looks secret: keys repeat (every lease of a reading has the same), so each is tested once. */
const secretKeys = new Map<string, boolean>();
function secretKey(k: string): boolean {
  let secret = secretKeys.get(k);
  if (secret === undefined) {
    secret = SECRET_KEY.test(k);
    if (secretKeys.size < 10_000) secretKeys.set(k, secret);
  }
  return secret;
}

/** The value itself when nothing in it changed, else a copy (plain objects and arrays only; anything else is kept as is). */
function walk(value: unknown, key: ((k: string) => boolean) | undefined, maxDepth: number, depth: number): unknown {
  if (typeof value === 'string') return redactText(value);
  if (typeof value !== 'object' || value === null) return value;
  if (depth > maxDepth) return '[…]';
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const r = walk(v, key, maxDepth, depth + 1);
      if (r !== v) (out ??= value.slice())[i] = r;
    }
    return out ?? value;
  }
  if (value instanceof Date) return value;
  let out: Record<string, unknown> | undefined;
  const record = value as Record<string, unknown>;
  for (const k of Object.keys(record)) {
    const v = record[k];
    const r = key?.(k) ? REDACTED : walk(v, key, maxDepth, depth + 1);
    if (r !== v) (out ??= { ...record })[k] = r;
  }
  return out ?? value;
}

/** Every string passed through redactText, keys and shape kept (for records read back later: the journal). */
export function redactStrings<T>(value: T): T {
  return walk(value, undefined, Infinity, 0) as T;
}

/**
 * Values under secret-looking keys and token-looking strings removed; deeper than `maxDepth` is cut (log fields: 8;
 * reports and run events are taken whole). Returns the value itself when it held nothing to remove.
 */
export function redact(value: unknown, maxDepth = 8): unknown {
  return walk(value, secretKey, maxDepth, 0);
}
