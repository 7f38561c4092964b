import { EXIT, KrError, quote } from '../core/errors.js';

/**
 * Where a run's trace and metrics go, by the standard OpenTelemetry environment or `--otel-endpoint`.
 * Export is on when the flag or one of the OTLP endpoint variables is set, and `OTEL_SDK_DISABLED` is not `true`.
 * The exporters read the rest of the standard environment themselves (`OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT`,
 * `..._COMPRESSION`, the per-signal variables); the flag's endpoint wins over the environment's endpoints.
 * Credentials (OTLP headers, a URL's `user:password@`) go over plain http only when allowed (`headersOverHttp`).
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

export interface OtelOptions {
  /** `--otel-endpoint`: wins over the environment's endpoints. */
  endpoint?: string;
  /** `--otel-headers-over-http`: send OTLP headers and URL credentials over plain http too. */
  headersOverHttp?: boolean;
  /** What is sent (a run: both; the MCP server's calls: traces), and whose, as a refusal names them. */
  signals?: readonly Signal[];
  whose?: string;
}

type Signal = 'traces' | 'metrics';

/** The option that lets credentials go over plain http, as errors name it. */
const HEADERS_OVER_HTTP_FLAG = '--otel-headers-over-http';

export function otelSettings(env: NodeJS.ProcessEnv, o: OtelOptions = {}): OtelSettings | undefined {
  let settings: OtelSettings | undefined;
  if (o.endpoint !== undefined) {
    const u = parseEndpoint(o.endpoint);
    const base = u.href.replace(/\/+$/, '');
    settings = { tracesUrl: `${base}/v1/traces`, metricsUrl: `${base}/v1/metrics`, shownAs: shownUrl(u.href) };
  } else if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true') {
    const set = ENDPOINT_VARS.find((v) => env[v]?.trim());
    settings = set ? { shownAs: shownUrl(env[set]!.trim()) } : undefined;
  }
  if (settings && !o.headersOverHttp) refuseCredentialsOverHttp(env, settings, o.signals ?? ['traces', 'metrics'], o.whose ?? "the run's");
  return settings;
}

const value = (env: NodeJS.ProcessEnv, name: string) => env[name]?.trim() || undefined;

/** Where a signal's exporter sends, as the OTLP exporters choose it: the flag's URL, the signal's variable, the base one, else localhost. */
function signalUrl(env: NodeJS.ProcessEnv, settings: OtelSettings, signal: Signal): string {
  const flag = signal === 'traces' ? settings.tracesUrl : settings.metricsUrl;
  const own = value(env, `OTEL_EXPORTER_OTLP_${signal.toUpperCase()}_ENDPOINT`);
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  return flag ?? own ?? `${(base ?? 'http://localhost:4318').replace(/\/+$/, '')}/v1/${signal}`;
}

/**
 * OTLP headers carry a collector's credentials (`authorization=Bearer ...`): over plain http anyone on the path can
 * read them, as a URL's `user:password@`. Refused unless allowed, as the promql probe's `tokenOverHttp`.
 */
function refuseCredentialsOverHttp(env: NodeJS.ProcessEnv, settings: OtelSettings, signals: readonly Signal[], whose: string): void {
  for (const signal of signals) {
    const url = signalUrl(env, settings, signal);
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      continue; // the exporter says so, in the one warning
    }
    if (u.protocol !== 'http:') continue;
    const headers = ['OTEL_EXPORTER_OTLP_HEADERS', `OTEL_EXPORTER_OTLP_${signal.toUpperCase()}_HEADERS`].filter((v) => value(env, v));
    const carried = [...headers, ...(u.username || u.password ? ["the URL's user:password@"] : [])];
    if (carried.length)
      throw new KrError(
        'OTEL_CREDENTIALS_OVER_HTTP',
        `${whose} ${signal} would go to ${shownUrl(url)} over plain http with ${carried.join(' and ')}, which anyone on the path ` +
          `can read: use an https:// endpoint, or pass ${HEADERS_OVER_HTTP_FLAG} for a collector on a link you trust`,
        { exit: EXIT.invalid },
      );
  }
}
