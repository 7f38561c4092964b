import type { Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { watchBackoff } from './timing.js';
import type { SimApi } from './api.js';
import type { WatchEventType } from './types.js';

export interface ListWatchOptions<T> {
  what: string;
  api: SimApi;
  list: () => Promise<{ items: T[]; resourceVersion: string }>;
  /** Watch path, e.g. /api/v1/pods. */
  path: string;
  query: Record<string, string>;
  /** After each (re)list: the full set. A relist after a failure is how a reconnecting kubelet catches up. */
  onSync: (items: T[]) => void | Promise<void>;
  onEvent: (type: WatchEventType, obj: T) => void | Promise<void>;
  clock: Clock;
  log: Logger;
  random?: () => number;
}

/**
 * List, then watch from the list's resourceVersion; resume the watch after a normal close, relist after an
 * error or 410 Gone, with back-off while the apiserver is unreachable. The resourceVersion never goes back.
 * The server closes each watch after 15-25 s, before client-node's 30 s inactivity timer would.
 */
export class ListWatcher<T extends { metadata?: { resourceVersion?: string } }> {
  private current: AbortController | undefined;
  private needList = true;

  constructor(private readonly o: ListWatchOptions<T>) {}

  /** Drops the current watch and lists again (a kubelet that just got its apiserver back catches up at once). */
  resync(): void {
    this.needList = true;
    this.current?.abort();
  }

  async run(signal: AbortSignal): Promise<void> {
    const o = this.o;
    let failures = 0;
    let rv = '';
    const random = o.random ?? Math.random;
    while (!signal.aborted) {
      const round = new AbortController();
      this.current = round;
      const onAbort = () => round.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        if (this.needList) {
          this.needList = false;
          const list = await o.list();
          rv = list.resourceVersion;
          await o.onSync(list.items);
          if (failures) o.log.info(`${o.what}: relisted after ${failures} failure(s)`);
          failures = 0;
        }
        if (round.signal.aborted) continue;
        const result = await watchOnce(o, rv, round.signal, Math.round(15 + 10 * random()));
        if (result.rv && newer(result.rv, rv)) rv = result.rv;
        if (result.gone) this.needList = true;
        if (result.error && !round.signal.aborted) throw result.error;
      } catch (e) {
        if (signal.aborted) return;
        failures++;
        this.needList = true;
        if (failures === 1 || failures % 10 === 0) o.log.warn(`${o.what}: ${messageOf(e)} (retrying)`, { failures });
        try {
          await o.clock.sleep(watchBackoff(failures, 500, 5000), signal);
        } catch {
          return;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    }
  }
}

interface WatchResult {
  rv?: string;
  gone?: boolean;
  error?: unknown;
}

function watchOnce<T extends { metadata?: { resourceVersion?: string } }>(
  o: ListWatchOptions<T>,
  rv: string,
  signal: AbortSignal,
  timeoutSeconds: number,
): Promise<WatchResult> {
  return new Promise((resolve) => {
    let last = rv;
    let gone = false;
    let chain: Promise<void> = Promise.resolve();
    let abortWatch: (() => void) | undefined;
    const onAbort = () => abortWatch?.();
    signal.addEventListener('abort', onAbort, { once: true });
    const query = { ...o.query, resourceVersion: rv, allowWatchBookmarks: 'true', timeoutSeconds: String(timeoutSeconds) };
    o.api.watcher
      .watch(
        o.path,
        query,
        (type: string, obj: T & { code?: number }) => {
          if (type === 'ERROR') {
            if (obj.code === 410) gone = true;
            return;
          }
          const v = obj.metadata?.resourceVersion;
          if (v && newer(v, last)) last = v;
          if (type === 'BOOKMARK') return;
          chain = chain.then(() => o.onEvent(type as WatchEventType, obj)).catch((e) => o.log.warn(`${o.what}: ${messageOf(e)}`));
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          void chain.then(() => resolve({ rv: last, gone, error: err ?? undefined }));
        },
      )
      .then((controller) => {
        abortWatch = () => controller.abort();
        if (signal.aborted) controller.abort();
      })
      .catch((e: unknown) => resolve({ rv: last, error: e }));
  });
}

/** Whether resourceVersion `a` is newer than `b` (numeric when both are; a watch never resumes from the past). */
export function newer(a: string, b: string): boolean {
  if (!b) return true;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a !== b;
}
