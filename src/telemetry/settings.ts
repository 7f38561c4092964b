import { EXIT, KrError, quote } from '../core/errors.js';

/**
 * Where a run's trace and metrics go, by the standard OpenTelemetry environment or `--otel-endpoint`.
 * Export is on when the flag or one of the OTLP endpoint variables is set, and `OTEL_SDK_DISABLED` is not `true`.
 * The exporters read the rest of the standard environment themselves (`OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`,
 * `..._COMPRESSION`, the per-signal variables); the flag's endpoint wins over the environment's endpoints.
 */
export interface OtelSettings {
  /** A full URL for traces (`.../v1/traces`) when the flag set it; undefined: the exporter reads the environment. */
  tracesUrl?: string;
  metricsUrl?: string;
  /** Where the data goes, for the one warning a failed export gives: scheme, host, port and path, never credentials. */
  shownAs: string;
}

const ENDPOINT_VARS = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'] as const;

/** The URL as a warning may print it: no user, password or query (a token can hide there). */
function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(an endpoint that is not a URL)';
  }
}

/** A base endpoint as OTEL_EXPORTER_OTLP_ENDPOINT takes it: `http://host:4318` (a path is kept, `/v1/...` appended). */
function parseEndpoint(flag: string): URL {
  let u: URL;
  try {
    u = new URL(flag);
  } catch {
    throw new KrError('OTEL_ENDPOINT_INVALID', `--otel-endpoint ${quote(flag)}: not a URL (e.g. http://127.0.0.1:4318)`, {
      exit: EXIT.invalid,
    });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new KrError('OTEL_ENDPOINT_INVALID', `--otel-endpoint ${quote(flag)}: OTLP/HTTP needs an http:// or https:// URL`, {
      exit: EXIT.invalid,
    });
  return u;
}

export function otelSettings(env: NodeJS.ProcessEnv, flag?: string): OtelSettings | undefined {
  if (flag !== undefined) {
    const u = parseEndpoint(flag);
    const base = u.href.replace(/\/+$/, '');
    return { tracesUrl: `${base}/v1/traces`, metricsUrl: `${base}/v1/metrics`, shownAs: shownUrl(u.href) };
  }
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const set = ENDPOINT_VARS.find((v) => env[v]?.trim());
  return set ? { shownAs: shownUrl(env[set]!.trim()) } : undefined;
}
