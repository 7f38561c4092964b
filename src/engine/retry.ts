import { KrError } from '../core/errors.js';
import { type Backoff, type FailedAttempt, retrying } from '../core/retry.js';
import type { Clock } from '../core/clock.js';
import { kubeTransient } from '../kube/transient.js';
import type { Attempt, RetriedOp } from './events.js';

/**
 * Whether a failure can pass, as whoever threw it decided: a KrError carries its transport's verdict
 * (src/nodes/ssh.ts, netns.ts, exec-process.ts decide theirs), failures of apiserver requests are judged by
 * src/kube/transient.ts, and an error wrapping one by what it wraps. Script exit codes, validation errors and
 * anything else are permanent. What is safe to repeat whatever happened (`safeToRepeat`: reverts, disarms, a
 * remediation's apply, lock and Lease renewals) also tries again after a script that ran out of time and after any
 * 5xx; a wait that has not succeeded yet (a component not healthy yet) is transient for everything retried.
 */
export function transientFailure(e: unknown, o: { idempotentWrite?: boolean; safeToRepeat?: boolean } = {}): string | undefined {
  let x: unknown = e;
  for (let depth = 0; depth < 5 && x instanceof Error; depth++) {
    if (x instanceof KrError) return x.transient ?? (o.safeToRepeat && x.code === 'EXEC_TIMEOUT' ? 'script timeout' : undefined);
    const kind = kubeTransient(x, o);
    if (kind) return kind;
    x = x.cause;
  }
  return undefined;
}

export interface EngineRetry {
  clock: Clock;
  signal: AbortSignal;
  /** No attempt starts after it: the rollback deadline, or the end of the step's timeout. */
  deadline: number;
  backoff?: Partial<Backoff>;
  maxAttempts?: number;
  /** Journals and reports one failed attempt. */
  record: (attempt: Attempt) => void;
  idempotentWrite?: boolean;
  /** Idempotent whatever happened: script timeouts and every 5xx are tried again too. */
  safeToRepeat?: boolean;
}

/** `fn` under the one retry policy (src/core/retry.ts), each failed attempt recorded; the failures are collected in `failures`. */
export function withRetries<T>(op: RetriedOp, fn: () => Promise<T>, o: EngineRetry, failures: FailedAttempt[] = []): Promise<T> {
  return retrying(fn, {
    clock: o.clock,
    signal: o.signal,
    deadline: o.deadline,
    backoff: o.backoff,
    maxAttempts: o.maxAttempts,
    classify: (e) => transientFailure(e, { idempotentWrite: o.idempotentWrite, safeToRepeat: o.safeToRepeat }),
    onFailure: (f) => {
      failures.push(f);
      o.record({ op, ...f });
    },
  });
}

/** The kinds of the failures that were retried, in order (for "reverted on attempt 3 after 2 connection resets"). */
export const retriedKinds = (failures: FailedAttempt[]): string[] =>
  failures.flatMap((f) => (f.transient !== undefined && f.retryInMs !== undefined ? [f.transient] : []));
