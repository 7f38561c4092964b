import { KrError, messageOf } from '../core/errors.js';
import { ApiStatusError } from './source.js';

/** Errors of a connection to the apiserver that can pass, by errno code. */
const NETWORK: Record<string, string> = {
  ECONNRESET: 'connection reset',
  ECONNREFUSED: 'connection refusal',
  ETIMEDOUT: 'connection timeout',
  EPIPE: 'lost connection',
  ECONNABORTED: 'lost connection',
  EHOSTUNREACH: 'unreachable network',
  ENETUNREACH: 'unreachable network',
  EAI_AGAIN: 'name resolution failure',
};

/**
 * Whether a failure of a request to the apiserver can pass, and its kind: the one place that decides it for the
 * cluster. Transient: network errors (reset, refused, timed out, broken pipe, "socket hang up"), 429, 503, 504,
 * a 500 whose Status says when to retry, and a 409 conflict when the write is idempotent (repeating it does no
 * harm). Permanent: every other status (400, 401, 403, 404, 422…) and anything that is not a request's failure.
 * For what is safe to repeat whatever happened (`safeToRepeat`: a revert, a disarm, a lock renewal), every 5xx is
 * transient too: a 500 or 502 from an apiserver or a proxy in front of it that is restarting passes.
 */
export function kubeTransient(e: unknown, o: { idempotentWrite?: boolean; safeToRepeat?: boolean } = {}): string | undefined {
  if (e instanceof ApiStatusError) {
    if (e.status === 429 || e.status === 503 || e.status === 504) return `apiserver ${e.status}`;
    if (o.safeToRepeat && e.status >= 500 && e.status <= 599) return `apiserver ${e.status}`;
    if (e.status === 500 && e.retryAfterSeconds !== undefined) return 'apiserver 500';
    if (e.status === 409 && o.idempotentWrite) return 'conflict';
    return undefined;
  }
  if (e instanceof KrError) return e.transient;
  if (!(e instanceof Error) || e instanceof TypeError) return undefined;
  const code = (e as NodeJS.ErrnoException).code;
  if (code !== undefined) return NETWORK[code];
  // errors without a code that name one, as undici and some proxies give them
  const named = /\b(ECONNRESET|ECONNREFUSED|ETIMEDOUT|EPIPE)\b/.exec(messageOf(e))?.[1];
  if (named) return NETWORK[named];
  return /socket hang up/i.test(e.message) ? 'connection reset' : undefined;
}
