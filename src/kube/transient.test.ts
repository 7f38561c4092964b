import { describe, expect, it } from 'vitest';
import { KrError } from '../core/errors.js';
import { statusFromBody } from './http.js';
import { ApiStatusError } from './source.js';
import { kubeTransient } from './transient.js';

const errno = (code: string, message = `connect ${code} 10.0.0.1:6443`) => Object.assign(new Error(message), { code });
const status = (code: number, details?: object) =>
  statusFromBody(code, JSON.stringify({ kind: 'Status', message: `HTTP ${code}`, details }));

describe('kubeTransient', () => {
  it('calls network errors transient, naming each', () => {
    expect(kubeTransient(errno('ECONNRESET'))).toBe('connection reset');
    expect(kubeTransient(errno('ECONNREFUSED'))).toBe('connection refusal');
    expect(kubeTransient(errno('ETIMEDOUT'))).toBe('connection timeout');
    expect(kubeTransient(errno('EPIPE'))).toBe('lost connection');
    expect(kubeTransient(errno('EAI_AGAIN'))).toBe('name resolution failure');
    expect(kubeTransient(new Error('socket hang up'))).toBe('connection reset');
    expect(kubeTransient(new Error('connect ECONNREFUSED'))).toBe('connection refusal');
    expect(
      kubeTransient(new KrError('KUBE_NO_ANSWER', 'no answer from fake:6443 within 10000 ms', { transient: 'connection timeout' })),
    ).toBe('connection timeout');
  });

  it('calls 429, 503, 504 and a 500 that says when to retry transient', () => {
    expect(kubeTransient(status(429, { retryAfterSeconds: 1 }))).toBe('apiserver 429');
    expect(kubeTransient(status(503))).toBe('apiserver 503');
    expect(kubeTransient(status(504))).toBe('apiserver 504');
    expect(kubeTransient(status(500, { retryAfterSeconds: 2 }))).toBe('apiserver 500');
    expect(kubeTransient(status(500))).toBeUndefined();
  });

  it('calls every 5xx and 429 transient for what is safe to repeat (a revert), never 403, 404 or a validation error', () => {
    const repeat = { safeToRepeat: true };
    for (const code of [500, 502, 503, 504, 507, 429]) expect(kubeTransient(status(code), repeat), String(code)).toBe(`apiserver ${code}`);
    for (const code of [400, 403, 404, 422]) expect(kubeTransient(status(code), repeat), String(code)).toBeUndefined();
    expect(kubeTransient(status(502))).toBeUndefined();
  });

  it('calls a 409 transient only for an idempotent write', () => {
    expect(kubeTransient(status(409))).toBeUndefined();
    expect(kubeTransient(status(409), { idempotentWrite: true })).toBe('conflict');
  });

  it('calls other statuses, validation errors and bugs permanent', () => {
    for (const code of [400, 401, 403, 404, 410, 422])
      expect(kubeTransient(new ApiStatusError(code, `HTTP ${code}`)), String(code)).toBeUndefined();
    expect(kubeTransient(new KrError('BAD_PARAMS', 'with.timeout: expected a duration'))).toBeUndefined();
    expect(kubeTransient(errno('ENOENT', 'open /etc/kubernetes/admin.conf'))).toBeUndefined();
    expect(kubeTransient(new TypeError('fetch ECONNRESET is not a function'))).toBeUndefined();
    expect(kubeTransient('ECONNRESET')).toBeUndefined();
  });
});
