import type { Clock } from '../engine/clock.js';
import type { Logger } from '../engine/logger.js';
import { messageOf } from '../errors.js';
import { formatDuration } from '../runbook/duration.js';
import { Backoff, type BackoffOptions, defaultBackoff } from './backoff.js';
import {
  compareResourceVersions,
  isGone,
  type ListWatchSource,
  objectKey,
  type RawObject,
  type Selection,
  statusError,
  type WatchEvent,
} from './source.js';

/**
 * The one list+watch helper (DESIGN §4.3). Each resource is listed once and then watched, shared by every probe
 * that asks for it. Bookmarks are requested, `timeoutSeconds` is jittered, a 410 Gone relists, failures back off
 * (0.8 s → 30 s), a silent stream is restarted by a watchdog, and the resourceVersion only ever moves forward:
 * a list or an event older than what was already seen is refused (incident 2). Freshness is explicit so that
 * probes read `unknown`, never `ok`, when the apiserver is unreachable or silent past its bound.
 */

export interface WatchSpec<T> extends Selection {
  /** Probes asking for the same key share one watch. */
  key: string;
  /** Keeps only what probes need of each object. */
  slim(object: RawObject): T;
}

export type Change<T> =
  | { type: 'added' | 'modified' | 'deleted'; key: string; object: T; previous?: T; relist: boolean }
  | { type: 'synced' }
  | { type: 'freshness'; fresh: boolean; reason: string };

export type WatchState = 'listing' | 'watching' | 'reconnecting' | 'failing' | 'stopped';

export interface Freshness {
  fresh: boolean;
  synced: boolean;
  state: WatchState;
  /** Why it is not fresh, or what it is doing. */
  reason: string;
  /** Last time anything came from the apiserver (clock ms). */
  lastContactAt?: number;
}

export interface WatchStats {
  lists: number;
  watches: number;
  events: number;
  gone: number;
  failures: number;
  inactivityRestarts: number;
  replaysDropped: number;
  staleListsRefused: number;
}

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

export interface WatchOptions {
  pageSize: number;
  /** The watch request's timeoutSeconds is drawn in [min, 2·min). */
  minTimeoutSeconds: number;
  backoff: BackoffOptions;
  /** A watch stream without any event (bookmarks included) for this long is restarted. */
  inactivityMs: number;
  /** When nothing came from the apiserver for this long, it is pinged. */
  pingAfterMs: number;
  pingTimeoutMs: number;
  /** Data older than this (no contact with the apiserver) is stale: probes read unknown. */
  staleAfterMs: number;
  random: () => number;
}

export const defaultWatchOptions: WatchOptions = {
  pageSize: 500,
  minTimeoutSeconds: 300,
  backoff: defaultBackoff,
  inactivityMs: 90_000,
  pingAfterMs: 2_000,
  pingTimeoutMs: 2_000,
  staleAfterMs: 5_000,
  random: Math.random,
};

class StaleListError extends Error {}

const INACTIVE = 'inactive';
const UNREACHABLE = 'unreachable';

class SharedWatch<T> {
  readonly store = new Map<string, T>();
  resourceVersion: string | undefined;
  readonly stats: WatchStats = {
    lists: 0,
    watches: 0,
    events: 0,
    gone: 0,
    failures: 0,
    inactivityRestarts: 0,
    replaysDropped: 0,
    staleListsRefused: 0,
  };
  refs = 0;
  private synced = false;
  private state: WatchState = 'listing';
  private lastError = '';
  private readonly listeners = new Set<(c: Change<T>) => void>();
  private readonly stop = new AbortController();
  private current?: AbortController;
  private cancelWatchdog?: () => void;
  private wake?: AbortController;
  private lastFresh = false;
  private readonly backoff: Backoff;

  constructor(
    readonly spec: WatchSpec<T>,
    private readonly hub: WatchHub,
  ) {
    this.backoff = new Backoff(hub.options.backoff);
    void this.loop();
  }

  subscribe(fn: (c: Change<T>) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  freshness(): Freshness {
    const now = this.hub.clock.now();
    const base = { synced: this.synced, state: this.state, lastContactAt: this.hub.lastContactAt };
    if (this.state === 'stopped') return { ...base, fresh: false, reason: 'watch stopped' };
    if (!this.synced)
      return { ...base, fresh: false, reason: this.lastError ? `not synced: ${this.lastError}` : `listing ${this.spec.path}` };
    if (this.state === 'failing') return { ...base, fresh: false, reason: `apiserver unreachable: ${this.lastError}` };
    if (this.hub.unreachable) return { ...base, fresh: false, reason: `apiserver unreachable: ${this.hub.unreachable}` };
    const silence = this.hub.lastContactAt === undefined ? Infinity : now - this.hub.lastContactAt;
    if (silence > this.hub.options.staleAfterMs)
      return { ...base, fresh: false, reason: `nothing from the apiserver for ${formatDuration(silence)}` };
    return { ...base, fresh: true, reason: this.state };
  }

  /** Emits a freshness change when the verdict flipped. */
  checkFreshness(): void {
    const f = this.freshness();
    if (f.fresh === this.lastFresh) return;
    this.lastFresh = f.fresh;
    this.emit({ type: 'freshness', fresh: f.fresh, reason: f.reason });
  }

  /** Ends the current stream; `why` decides whether that counts as a failure. */
  interrupt(why: typeof INACTIVE | typeof UNREACHABLE): void {
    this.current?.abort(why);
  }

  /** Cuts a back-off wait short (the apiserver answers again). */
  retryNow(): void {
    this.wake?.abort();
  }

  close(): void {
    this.setState('stopped');
    this.stop.abort();
    this.cancelWatchdog?.();
    this.listeners.clear();
  }

  private emit(c: Change<T>): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(c);
      } catch (e) {
        this.hub.log.warn(`watch ${this.spec.key}: a subscriber failed: ${messageOf(e)}`);
      }
    }
  }

  private setState(s: WatchState, error = ''): void {
    this.state = s;
    if (error) this.lastError = error;
    this.checkFreshness();
  }

  private async loop(): Promise<void> {
    let needList = true;
    let goneInARow = 0;
    while (!this.stop.signal.aborted) {
      try {
        if (needList) {
          this.setState('listing');
          await this.relist();
          needList = false;
        }
        await this.watchOnce();
        goneInARow = 0;
      } catch (e) {
        if (this.stop.signal.aborted) return;
        if (isGone(e)) {
          this.stats.gone++;
          needList = true;
          this.hub.log.debug(`watch ${this.spec.key}: resourceVersion ${this.resourceVersion} expired (410 Gone), relisting`);
          if (++goneInARow <= 2) continue;
        }
        if (e instanceof StaleListError) this.stats.staleListsRefused++;
        this.stats.failures++;
        this.setState('failing', messageOf(e));
        this.hub.log.debug(`watch ${this.spec.key}: ${messageOf(e)}`);
        await this.pause(this.backoff.next());
      }
    }
  }

  private async pause(ms: number): Promise<void> {
    this.wake = new AbortController();
    const signal = AbortSignal.any([this.stop.signal, this.wake.signal]);
    try {
      await this.hub.clock.sleep(ms, signal);
    } catch {
      // woken early or stopped
    } finally {
      this.wake = undefined;
    }
  }

  private async relist(): Promise<void> {
    const fresh = new Map<string, T>();
    let cont: string | undefined;
    let listRv: string | undefined;
    this.stats.lists++;
    do {
      const page = await this.hub.source.list({ ...this.selection(), limit: this.hub.options.pageSize, continue: cont, signal: this.stop.signal });
      this.hub.contact();
      listRv ??= page.resourceVersion;
      for (const item of page.items) fresh.set(objectKey(item), this.spec.slim(item));
      cont = page.continue || undefined;
    } while (cont);
    if (this.resourceVersion !== undefined && compareResourceVersions(listRv, this.resourceVersion) === -1)
      throw new StaleListError(`refused a list at resourceVersion ${listRv}, older than ${this.resourceVersion} already seen`);
    const relist = this.synced;
    for (const [key, old] of this.store)
      if (!fresh.has(key)) {
        this.store.delete(key);
        this.emit({ type: 'deleted', key, object: old, relist });
      }
    for (const [key, obj] of fresh) {
      const old = this.store.get(key);
      this.store.set(key, obj);
      if (old === undefined) this.emit({ type: 'added', key, object: obj, relist });
      else if (JSON.stringify(old) !== JSON.stringify(obj)) this.emit({ type: 'modified', key, object: obj, previous: old, relist });
    }
    this.resourceVersion = listRv;
    if (!this.synced) {
      this.synced = true;
      this.emit({ type: 'synced' });
    }
  }

  private selection(): { path: string; labelSelector?: string; fieldSelector?: string } {
    const { path, labelSelector, fieldSelector } = this.spec;
    return { path, labelSelector, fieldSelector };
  }

  private armWatchdog(ac: AbortController): void {
    this.cancelWatchdog?.();
    this.cancelWatchdog = this.hub.clock.setTimer(this.hub.options.inactivityMs, () => {
      this.stats.inactivityRestarts++;
      this.hub.log.debug(`watch ${this.spec.key}: silent for ${formatDuration(this.hub.options.inactivityMs)}, restarting it`);
      ac.abort(INACTIVE);
    });
  }

  private async watchOnce(): Promise<void> {
    const ac = new AbortController();
    this.current = ac;
    const signal = AbortSignal.any([this.stop.signal, ac.signal]);
    const { minTimeoutSeconds, random } = this.hub.options;
    const opened = this.hub.clock.now();
    try {
      this.stats.watches++;
      const stream = await this.hub.source.watch({
        ...this.selection(),
        resourceVersion: this.resourceVersion ?? '',
        timeoutSeconds: Math.floor(minTimeoutSeconds * (1 + random())),
        allowWatchBookmarks: true,
        signal,
      });
      this.hub.contact();
      this.setState('watching');
      this.armWatchdog(ac);
      for await (const ev of stream) {
        if (signal.aborted) break;
        this.hub.contact();
        this.armWatchdog(ac);
        this.apply(ev);
      }
    } catch (e) {
      if (ac.signal.reason !== INACTIVE || this.stop.signal.aborted) throw e;
    } finally {
      this.cancelWatchdog?.();
      this.current = undefined;
    }
    if (ac.signal.reason === UNREACHABLE) throw new Error(this.hub.unreachable || 'apiserver unreachable');
    this.backoff.healthyFor(this.hub.clock.now() - opened);
    if (!this.stop.signal.aborted) this.setState('reconnecting');
  }

  private apply(ev: WatchEvent): void {
    if (ev.type === 'ERROR') throw statusError(ev.object);
    const rv = ev.object.metadata?.resourceVersion ?? '';
    if (this.resourceVersion !== undefined && rv) {
      const order = compareResourceVersions(rv, this.resourceVersion);
      // a bookmark at the resourceVersion already seen only says "nothing new": not a replay
      if (order !== undefined && (order < 0 || (order === 0 && ev.type !== 'BOOKMARK'))) {
        // A replay from the past (incident 2): applying it would resurrect or delete objects wrongly.
        this.stats.replaysDropped++;
        this.hub.log.warn(`watch ${this.spec.key}: dropped a ${ev.type} at resourceVersion ${rv}, older than ${this.resourceVersion}`);
        return;
      }
    }
    if (rv) this.resourceVersion = rv;
    if (ev.type === 'BOOKMARK') return;
    this.stats.events++;
    const key = objectKey(ev.object);
    const old = this.store.get(key);
    if (ev.type === 'DELETED') {
      this.store.delete(key);
      this.emit({ type: 'deleted', key, object: old ?? this.spec.slim(ev.object), relist: false });
      return;
    }
    const obj = this.spec.slim(ev.object);
    this.store.set(key, obj);
    this.emit({ type: old === undefined ? 'added' : 'modified', key, object: obj, previous: old, relist: false });
  }
}

/**
 * Every watch of one run, by key, sharing one liveness check of the apiserver. Created once per run by
 * createKubeAccess (ctx.kube.watches).
 */
export class WatchHub {
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
      w = new SharedWatch<T>(spec, this);
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
    const cancel = this.clock.setTimer(this.options.pingTimeoutMs, () => ac.abort(new Error(`no answer within ${formatDuration(this.options.pingTimeoutMs)}`)));
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
