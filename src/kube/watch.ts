import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { type Liveness, SharedWatch, UNREACHABLE } from './reflector.js';
import type { ListWatchSource } from './source.js';
import { type Change, defaultWatchOptions, type Freshness, type WatchOptions, type WatchSpec, type WatchStats } from './watch-types.js';

/**
 * The one list+watch helper. Each resource is listed once and then watched, shared by every probe
 * that asks for it. Bookmarks are requested, `timeoutSeconds` is jittered, a 410 Gone relists, failures back off
 * (0.8 s → 30 s), a silent stream is restarted by a watchdog, and the resourceVersion only ever moves forward:
 * a list or an event older than what was already seen is refused (incident 2). Freshness is explicit so that
 * probes read `unknown`, never `ok`, when the apiserver is unreachable or silent past its bound.
 */

export interface WatchHandle<T> {
  readonly key: string;
  /** Current objects by `namespace/name` (or `name`). */
  readonly store: ReadonlyMap<string, T>;
  readonly resourceVersion: string | undefined;
  readonly stats: Readonly<WatchStats>;
  freshness(): Freshness;
  /** Calls `fn` synchronously on every change; returns the unsubscribe function. */
  subscribe(fn: (change: Change<T>) => void): () => void;
  /** Drops this reference; the watch stops when nobody holds it. */
  release(): void;
}

/**
 * Every watch of one run, by key, sharing one liveness check of the apiserver. Created once per run by
 * createKubeAccess (ctx.kube.watches).
 */
export class WatchHub implements Liveness {
  readonly options: WatchOptions;
  lastContactAt: number | undefined;
  /** Why the apiserver is believed unreachable, or '' when it answers. */
  unreachable = '';
  private readonly watches = new Map<string, SharedWatch<unknown>>();
  private cancelTick?: () => void;
  private pinging = false;

  constructor(
    readonly source: ListWatchSource,
    readonly clock: Clock,
    readonly log: Logger,
    options: Partial<WatchOptions> = {},
  ) {
    this.options = { ...defaultWatchOptions, ...options };
  }

  /** A shared watch of `spec.key`: the first caller starts it, the last release stops it. */
  watch<T>(spec: WatchSpec<T>): WatchHandle<T> {
    let w = this.watches.get(spec.key) as SharedWatch<T> | undefined;
    if (!w) {
      w = new SharedWatch<T>({ spec, source: this.source, clock: this.clock, log: this.log, options: this.options, liveness: this });
      this.watches.set(spec.key, w as SharedWatch<unknown>);
      this.scheduleTick();
    }
    w.refs++;
    const shared = w;
    const subs = new Set<() => void>();
    let released = false;
    return {
      key: spec.key,
      store: shared.store,
      get resourceVersion() {
        return shared.resourceVersion;
      },
      stats: shared.stats,
      freshness: () => shared.freshness(),
      subscribe: (fn) => {
        const off = shared.subscribe(fn);
        subs.add(off);
        return () => {
          off();
          subs.delete(off);
        };
      },
      release: () => {
        if (released) return;
        released = true;
        for (const off of subs) off();
        if (--shared.refs > 0) return;
        shared.close();
        this.watches.delete(spec.key);
      },
    };
  }

  /** Keys of the watches running now (diagnostics, tests). */
  keys(): string[] {
    return [...this.watches.keys()].sort();
  }

  /** Something came from the apiserver. */
  contact(): void {
    this.lastContactAt = this.clock.now();
    if (this.unreachable) {
      this.unreachable = '';
      for (const w of this.watches.values()) {
        w.retryNow();
        w.checkFreshness();
      }
    }
  }

  close(): void {
    this.cancelTick?.();
    for (const w of this.watches.values()) w.close();
    this.watches.clear();
  }

  private scheduleTick(): void {
    if (this.cancelTick) return;
    const period = Math.max(100, Math.floor(this.options.pingAfterMs / 2));
    this.cancelTick = this.clock.setTimer(period, () => {
      this.cancelTick = undefined;
      if (this.watches.size === 0) return;
      this.tick();
      this.scheduleTick();
    });
  }

  private tick(): void {
    const silence = this.lastContactAt === undefined ? Infinity : this.clock.now() - this.lastContactAt;
    if (silence >= this.options.pingAfterMs && !this.pinging) void this.ping();
    for (const w of this.watches.values()) w.checkFreshness();
  }

  private async ping(): Promise<void> {
    this.pinging = true;
    const ac = new AbortController();
    const cancel = this.clock.setTimer(this.options.pingTimeoutMs, () =>
      ac.abort(new Error(`no answer within ${formatDuration(this.options.pingTimeoutMs)}`)),
    );
    try {
      await this.source.ping(ac.signal);
      this.contact();
    } catch (e) {
      const why = ac.signal.aborted ? messageOf(ac.signal.reason) : messageOf(e);
      const first = !this.unreachable;
      this.unreachable = why;
      if (first) this.log.debug(`apiserver unreachable: ${why}`);
      for (const w of this.watches.values()) {
        if (first) w.interrupt(UNREACHABLE);
        w.checkFreshness();
      }
    } finally {
      cancel();
      this.pinging = false;
    }
  }
}
