import { messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { Backoff } from './backoff.js';
import { ApiStatusError, compareResourceVersions, INITIAL_EVENTS_END, isGone, objectKey, statusError, type WatchEvent } from './source.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { ListWatchSource } from './source.js';
import type { Change, Freshness, WatchOptions, WatchSpec, WatchState, WatchStats } from './watch-types.js';

/**
 * One shared watch of one resource, as client-go's reflector does it: list, then watch from the list's
 * resourceVersion; relist on 410 Gone; back off on failures; restart a silent stream; and never move the
 * resourceVersion backwards (a list or an event older than what was seen is refused: incident 2). Where the
 * apiserver streams initial events (watch-list), the initial state comes from one watch instead of a paginated
 * list: served from the watch cache, one object at a time, and the same stream carries the changes after it.
 */
class StaleListError extends Error {}

export const INACTIVE = 'inactive';
export const UNREACHABLE = 'unreachable';

/** Whether the apiserver answers, shared by every watch of a run: each contact is reported, each watch reads it. */
export interface Liveness {
  readonly lastContactAt: number | undefined;
  /** Why the apiserver is believed unreachable, or '' when it answers. */
  readonly unreachable: string;
  /** Something came from the apiserver. */
  contact(): void;
}

/** What one reflector is handed, as client-go's reflector gets a ListerWatcher, a store, a clock and a backoff. */
export interface ReflectorDeps<T> {
  spec: WatchSpec<T>;
  source: ListWatchSource;
  clock: Clock;
  log: Logger;
  options: WatchOptions;
  liveness: Liveness;
}

export class SharedWatch<T> {
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
    streamedLists: 0,
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
  /** Whether to read initial states as watch-lists: asked of the source once; false once the server refuses one. */
  private streaming: boolean | undefined;
  /** A watch-list's initial events until its end bookmark: the objects they brought so far. */
  private pending?: Map<string, T>;

  readonly spec: WatchSpec<T>;
  private readonly d: Omit<ReflectorDeps<T>, 'spec' | 'liveness'>;
  private readonly live: Liveness;

  constructor(deps: ReflectorDeps<T>) {
    const { spec, liveness, ...rest } = deps;
    this.spec = spec;
    this.d = rest;
    this.live = liveness;
    this.backoff = new Backoff(deps.options.backoff);
    void this.loop();
  }

  subscribe(fn: (c: Change<T>) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  freshness(): Freshness {
    const now = this.d.clock.now();
    const base = { synced: this.synced, state: this.state, lastContactAt: this.live.lastContactAt };
    if (this.state === 'stopped') return { ...base, fresh: false, reason: 'watch stopped' };
    if (!this.synced)
      return { ...base, fresh: false, reason: this.lastError ? `not synced: ${this.lastError}` : `listing ${this.spec.path}` };
    if (this.state === 'failing') return { ...base, fresh: false, reason: `apiserver unreachable: ${this.lastError}` };
    if (this.live.unreachable) return { ...base, fresh: false, reason: `apiserver unreachable: ${this.live.unreachable}` };
    const silence = this.live.lastContactAt === undefined ? Infinity : now - this.live.lastContactAt;
    if (silence > this.d.options.staleAfterMs)
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

  /**
   * Ends the current stream; `why` decides whether that counts as a failure. A watch-list still streaming its initial
   * events is not ended for an unanswered ping, as a paginated list is not: an apiserver too busy to answer a ping
   * for a few seconds is still sending them, and starting over would stream all of them again (at 150,000 pods, a
   * watch-list ended that way took six minutes to complete instead of twenty seconds). Until its end bookmark the
   * watch is not synced, so its probes read unknown; a stream that has really died is restarted by the inactivity
   * watchdog.
   */
  interrupt(why: typeof INACTIVE | typeof UNREACHABLE): void {
    if (why === UNREACHABLE && this.pending) return;
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
        this.d.log.warn(`watch ${this.spec.key}: a subscriber failed: ${messageOf(e)}`);
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
          if (await this.canStream()) {
            // the stream goes on as the watch once the initial state is in; false: refused, list instead
            needList = !(await this.watchOnce(true));
            if (!needList) {
              goneInARow = 0;
              continue;
            }
          }
          await this.relist();
          needList = false;
        }
        await this.watchOnce(false);
        goneInARow = 0;
      } catch (e) {
        if (this.stop.signal.aborted) return;
        if (isGone(e)) {
          this.stats.gone++;
          needList = true;
          this.d.log.debug(`watch ${this.spec.key}: resourceVersion ${this.resourceVersion} expired (410 Gone), relisting`);
          if (++goneInARow <= 2) continue;
        }
        if (e instanceof StaleListError) this.stats.staleListsRefused++;
        this.stats.failures++;
        this.setState('failing', messageOf(e));
        this.d.log.debug(`watch ${this.spec.key}: ${messageOf(e)}`);
        await this.pause(this.backoff.next());
      }
    }
  }

  private async pause(ms: number): Promise<void> {
    this.wake = new AbortController();
    const signal = AbortSignal.any([this.stop.signal, this.wake.signal]);
    try {
      await this.d.clock.sleep(ms, signal);
    } catch {
      // woken early or stopped
    } finally {
      this.wake = undefined;
    }
  }

  private async canStream(): Promise<boolean> {
    if (this.streaming === undefined) this.streaming = (await this.d.source.streamsInitialEvents?.(this.stop.signal)) ?? false;
    return this.streaming;
  }

  private async relist(): Promise<void> {
    const fresh = new Map<string, T>();
    let cont: string | undefined;
    let listRv: string | undefined;
    this.stats.lists++;
    do {
      const page = await this.d.source.list({
        ...this.selection(),
        limit: this.d.options.pageSize,
        continue: cont,
        signal: this.stop.signal,
      });
      this.live.contact();
      listRv ??= page.resourceVersion;
      for (const item of page.items) fresh.set(objectKey(item), this.spec.slim(item));
      cont = page.continue || undefined;
    } while (cont);
    this.replace(fresh, listRv);
  }

  /** The store becomes `fresh`, the state at `listRv`: events for what changed, then `synced` the first time. */
  private replace(fresh: Map<string, T>, listRv: string | undefined): void {
    if (this.resourceVersion !== undefined && listRv !== undefined && compareResourceVersions(listRv, this.resourceVersion) === -1)
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
    this.cancelWatchdog = this.d.clock.setTimer(this.d.options.inactivityMs, () => {
      this.stats.inactivityRestarts++;
      this.d.log.debug(`watch ${this.spec.key}: silent for ${formatDuration(this.d.options.inactivityMs)}, restarting it`);
      ac.abort(INACTIVE);
    });
  }

  /**
   * One watch stream, until it ends. `initial`: a watch-list, whose initial events become the store at the end
   * bookmark (nothing of a stream cut short before it is kept: no probe reads a partial state); false when the
   * apiserver refuses to stream initial events (the caller lists instead).
   */
  private async watchOnce(initial: boolean): Promise<boolean> {
    const ac = new AbortController();
    this.current = ac;
    const signal = AbortSignal.any([this.stop.signal, ac.signal]);
    const { minTimeoutSeconds, random } = this.d.options;
    const opened = this.d.clock.now();
    const timeoutSeconds = Math.floor(minTimeoutSeconds * (1 + random()));
    this.pending = initial ? new Map<string, T>() : undefined;
    let cutShort: boolean;
    try {
      this.stats.watches++;
      let stream: AsyncIterable<WatchEvent>;
      try {
        stream = await this.d.source.watch({
          ...this.selection(),
          resourceVersion: this.resourceVersion ?? '',
          timeoutSeconds,
          allowWatchBookmarks: true,
          ...(initial ? { sendInitialEvents: true as const } : {}),
          signal,
        });
      } catch (e) {
        if (!initial || !(e instanceof ApiStatusError) || (e.status !== 400 && e.status !== 422)) throw e;
        this.streaming = false;
        this.d.log.debug(`watch ${this.spec.key}: the apiserver does not stream initial events (${messageOf(e)}); listing instead`);
        return false;
      }
      this.live.contact();
      if (!initial) this.setState('watching');
      this.armWatchdog(ac);
      for await (const ev of stream) {
        if (signal.aborted) break;
        this.live.contact();
        this.armWatchdog(ac);
        if (!this.pending) this.apply(ev);
        else if (ev.type === 'ADDED') this.pending.set(objectKey(ev.object), this.spec.slim(ev.object));
        else if (ev.type === 'BOOKMARK' && isInitialEventsEnd(ev)) {
          this.stats.streamedLists++;
          this.replace(this.pending, ev.object.metadata?.resourceVersion);
          this.pending = undefined;
          this.setState('watching');
        } else if (ev.type === 'ERROR') throw statusError(ev.object);
        else {
          // Initial events are all ADDED, and the apiserver sends no other bookmark before the one that ends them: a
          // server (or a proxy) that ignored sendInitialEvents would otherwise keep this watch "listing" for ever.
          // List from now on.
          this.streaming = false;
          throw new Error(
            `a ${ev.type === 'BOOKMARK' ? 'bookmark that does not end them' : `${ev.type} event`} among the initial events of ${this.spec.path}: listing instead`,
          );
        }
      }
      // An apiserver ends a watch it finds too slow to read its events ("Forcing watcher close due to unresponsiveness"):
      // the next one takes up from the last resourceVersion, and the events in between come late. Said, to be found.
      const lasted = this.d.clock.now() - opened;
      if (!signal.aborted && lasted < timeoutSeconds * 1000 - 1000)
        this.d.log.debug(
          `watch ${this.spec.key}: the apiserver ended the stream after ${formatDuration(lasted)}, before the ${timeoutSeconds}s asked for`,
        );
    } catch (e) {
      if (ac.signal.reason !== INACTIVE || this.stop.signal.aborted) throw e;
    } finally {
      this.cancelWatchdog?.();
      this.current = undefined;
      cutShort = this.pending !== undefined;
      this.pending = undefined;
    }
    if (ac.signal.reason === UNREACHABLE) throw new Error(this.live.unreachable || 'apiserver unreachable');
    if (cutShort && !this.stop.signal.aborted)
      throw new Error(`the stream of initial events of ${this.spec.path} ended before all of them came`);
    this.backoff.healthyFor(this.d.clock.now() - opened);
    if (!this.stop.signal.aborted) this.setState('reconnecting');
    return true;
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
        this.d.log.warn(`watch ${this.spec.key}: dropped a ${ev.type} at resourceVersion ${rv}, older than ${this.resourceVersion}`);
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

function isInitialEventsEnd(ev: WatchEvent): boolean {
  const annotations = ev.object.metadata?.annotations as Record<string, string> | undefined;
  return annotations?.[INITIAL_EVENTS_END] === 'true';
}
