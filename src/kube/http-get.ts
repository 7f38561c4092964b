import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Clock } from '../core/clock.js';
import { KrError, quote } from '../core/errors.js';

export interface GetOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  clock: Clock;
  headers?: Record<string, string>;
  /** PEM text or a file path of the CA, client certificate and key. */
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Do not check the server's certificate. */
  insecure?: boolean;
  /** Answers longer than this are cut (bytes; 8 MiB when absent): the rest is not read. */
  maxBytes?: number;
}

export interface GetAnswer {
  status: number;
  body: string;
  /** True when the body was longer than maxBytes and cut there. */
  truncated: boolean;
  /** Time to the full answer, by options.clock. */
  ms: number;
}

/** PEM given inline or read from a file. */
function pem(value: string | Buffer | undefined): string | Buffer | undefined {
  if (value === undefined || Buffer.isBuffer(value)) return value;
  if (value.includes('-----BEGIN')) return value;
  try {
    return readFileSync(value);
  } catch {
    throw new KrError('FILE_UNREADABLE', `cannot read ${quote(value)}`, { exit: 2 });
  }
}

/** One GET to any URL (not the apiserver): health endpoints, metrics. Network errors and timeouts throw. */
export function httpGet(url: string, o: GetOptions): Promise<GetAnswer> {
  const u = new URL(url);
  const start = o.clock.now();
  const max = o.maxBytes ?? 8 * 1024 * 1024;
  return new Promise<GetAnswer>((resolve, reject) => {
    const tls = u.protocol === 'https:' ? { ca: pem(o.ca), cert: pem(o.cert), key: pem(o.key), rejectUnauthorized: !o.insecure } : {};
    const req = (u.protocol === 'https:' ? https : http).request(u, { method: 'GET', headers: o.headers, agent: false, ...tls });
    let settled = false;
    const done = (e: Error | undefined, a?: GetAnswer) => {
      if (settled) return;
      settled = true;
      cancel();
      o.signal?.removeEventListener('abort', onAbort);
      if (e || a?.truncated) req.destroy();
      if (e) reject(e);
      else resolve(a!);
    };
    const cancel = o.clock.setTimer(o.timeoutMs, () => done(new Error(`no answer from ${u.host} within ${o.timeoutMs} ms`)));
    const onAbort = () => done(new Error('aborted'));
    if (o.signal?.aborted) return onAbort();
    o.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e) => done(e));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const answer = (truncated: boolean) => ({
        status: res.statusCode ?? 0,
        body: Buffer.concat(chunks).toString('utf8'),
        truncated,
        ms: o.clock.now() - start,
      });
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        if (size + chunk.length > max) {
          chunks.push(chunk.subarray(0, max - size));
          done(undefined, answer(true));
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('error', (e) => done(e));
      res.on('end', () => done(undefined, answer(false)));
    });
    req.end();
  });
}
