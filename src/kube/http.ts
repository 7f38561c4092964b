import http from 'node:http';
import https from 'node:https';
import type { Clock } from '../core/clock.js';
import { KrError } from '../core/errors.js';
import type { ClientConfig } from './kubeconfig.js';
import { ApiStatusError } from './source.js';
import { agentFor, requestTls } from './proxy.js';

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** Of the body: JSON unless said (server-side apply: application/apply-patch+yaml, of which JSON is a form). */
  contentType?: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Extra headers (User-Agent, Impersonate-User); the kubeconfig's credentials always win over them. */
  headers?: Record<string, string>;
  /** `request` reads the answer to its end but keeps none of it (body ''): a request load needs only the status. */
  discardBody?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface HttpAnswer {
  status: number;
  body: string;
}

/**
 * Requests to the apiserver with the kubeconfig's credentials (client certificates, tokens, exec plugins: see
 * kubeconfig.ts), over one keep-alive agent, made again when an exec plugin hands out a new client certificate.
 * Streams are used for watches.
 */
export class KubeHttp {
  private agent?: http.Agent;
  private agentCert?: Buffer;
  private readonly retired: http.Agent[] = [];

  constructor(
    readonly config: ClientConfig,
    private readonly clock: Clock,
  ) {}

  get server(): string {
    return this.config.server;
  }

  url(path: string, query: RequestOptions['query'] = {}): URL {
    const base = new URL(this.server);
    const url = new URL(base.pathname.replace(/\/$/, '') + path, base);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    return url;
  }

  /** A whole answer as text, whatever its status; network failures and timeouts throw. */
  async request(path: string, o: RequestOptions = {}): Promise<HttpAnswer> {
    const ac = new AbortController();
    const signal = o.signal ? AbortSignal.any([o.signal, ac.signal]) : ac.signal;
    const host = this.url(path).host;
    const cancel = o.timeoutMs ? this.clock.setTimer(o.timeoutMs, () => ac.abort(noAnswer(host, o.timeoutMs ?? 0))) : undefined;
    try {
      const res = await this.open(path, { ...o, timeoutMs: undefined, signal });
      res.setEncoding('utf8');
      let body = '';
      for await (const chunk of res) if (!o.discardBody) body += chunk as string;
      return { status: res.statusCode ?? 0, body };
    } catch (e) {
      throw signal.aborted && signal.reason instanceof Error ? signal.reason : e;
    } finally {
      cancel?.();
    }
  }

  /** JSON of a 2xx answer; any other status throws ApiStatusError with the Status message. */
  async json<T>(path: string, o: RequestOptions = {}): Promise<T> {
    const a = await this.request(path, o);
    if (a.status < 200 || a.status > 299) throw statusFromBody(a.status, a.body);
    return JSON.parse(a.body) as T;
  }

  /** Opens a request and resolves with the response once its headers came (the body is still to be read). */
  async open(path: string, o: RequestOptions = {}): Promise<http.IncomingMessage> {
    const url = this.url(path, o.query);
    const creds = await this.config.credentials();
    const headers: Record<string, string> = { Accept: 'application/json', ...o.headers, ...creds.headers };
    const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
    if (payload !== undefined) {
      headers['Content-Type'] = o.contentType ?? 'application/json';
      // Node frames a body by itself only for methods that usually have one: a DELETE's (DeleteOptions) went unread
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const secure = url.protocol === 'https:';
    if (this.agent && secure && creds.cert !== this.agentCert) {
      // a new client certificate: new connections use it; the open ones (watches) end in their own time
      this.retired.push(this.agent);
      this.agent = undefined;
    }
    this.agentCert = creds.cert;
    const tls = { ca: creds.ca, cert: creds.cert, key: creds.key, rejectUnauthorized: !creds.insecure, servername: creds.servername };
    this.agent ??= agentFor(secure, tls, this.config.proxyUrl);
    const lib = secure ? https : http;
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = lib.request(url, {
        method: o.method ?? 'GET',
        headers,
        agent: this.agent,
        ...requestTls(secure, tls, this.config.proxyUrl),
      });
      let cancelTimer: (() => void) | undefined;
      const fail = (e: Error) => {
        cancelTimer?.();
        req.destroy(e);
        reject(e);
      };
      if (o.timeoutMs) cancelTimer = this.clock.setTimer(o.timeoutMs, () => fail(noAnswer(url.host, o.timeoutMs ?? 0)));
      const onAbort = () => fail(o.signal?.reason instanceof Error ? o.signal.reason : new Error('aborted'));
      if (o.signal?.aborted) return onAbort();
      o.signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (e) => {
        cancelTimer?.();
        reject(e);
      });
      req.on('response', (res) => {
        cancelTimer?.();
        res.on('close', () => o.signal?.removeEventListener('abort', onAbort));
        resolve(res);
      });
      req.end(payload);
    });
  }

  close(): void {
    for (const a of this.retired.splice(0)) a.destroy();
    this.agent?.destroy();
    this.agent = undefined;
  }
}

/** A request the apiserver did not answer in time: transient, like a connection timeout. */
function noAnswer(host: string, ms: number): KrError {
  return new KrError('KUBE_NO_ANSWER', `no answer from ${host} within ${ms} ms`, { transient: 'connection timeout' });
}

/** The apiserver's Status body as an error. */
export function statusFromBody(status: number, body: string): ApiStatusError {
  try {
    const s = JSON.parse(body) as { message?: string; reason?: string; details?: { retryAfterSeconds?: unknown } };
    const retryAfter = s.details?.retryAfterSeconds;
    return new ApiStatusError(status, s.message ?? `HTTP ${status}`, s.reason, typeof retryAfter === 'number' ? retryAfter : undefined);
  } catch {
    return new ApiStatusError(status, `HTTP ${status}: ${body.slice(0, 200)}`);
  }
}
