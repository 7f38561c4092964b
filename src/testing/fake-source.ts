import type { Clock } from '../core/clock.js';
import {
  ApiStatusError,
  INITIAL_EVENTS_END,
  type ListPage,
  type ListRequest,
  type ListWatchSource,
  objectKey,
  type RawObject,
  type WatchEvent,
  type WatchRequest,
} from '../kube/source.js';

/**
 * List+watch sources for tests. `ScriptedSource` replays recorded answers in order (with pauses on a fake clock,
 * silent connections, 410s); `FakeApiServer` keeps objects and streams their changes to open watches, and can be
 * taken down and brought back.
 */

export type WatchScriptItem = WatchEvent | { wait: number } | { silent: true } | { fail: string };

export type ScriptStep =
  | { list: ListPage }
  | { listError: { status?: number; message: string } }
  | { watch: WatchScriptItem[] }
  | { watchError: { status?: number; message: string } };

export interface RecordedCall {
  kind: 'list' | 'watch' | 'watch-list' | 'ping';
  path?: string;
  resourceVersion?: string;
  timeoutSeconds?: number;
  allowWatchBookmarks?: boolean;
  continue?: string;
  at: number;
}

function abortError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new Error(`aborted (${String(r)})`);
}

/** Never settles until `signal` aborts, then rejects. */
function hang(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    signal.addEventListener('abort', () => reject(abortError(signal)), { once: true });
  });
}

function failure(e: { status?: number; message: string }): Error {
  return e.status ? new ApiStatusError(e.status, e.message) : new Error(e.message);
}

export class ScriptedSource implements ListWatchSource {
  readonly calls: RecordedCall[] = [];
  /** What `ping` does; resolves by default. */
  pingHandler: (signal: AbortSignal) => Promise<void> = async () => {};
  private readonly lists: ScriptStep[] = [];
  private readonly watches: ScriptStep[] = [];

  constructor(
    private readonly clock: Clock,
    steps: ScriptStep[] = [],
  ) {
    this.add(...steps);
  }

  /** Queues more answers; lists and watches are consumed in order, each from its own queue. */
  add(...steps: ScriptStep[]): void {
    for (const s of steps) ('list' in s || 'listError' in s ? this.lists : this.watches).push(s);
  }

  get remaining(): number {
    return this.lists.length + this.watches.length;
  }

  async list(req: ListRequest): Promise<ListPage> {
    this.calls.push({ kind: 'list', path: req.path, continue: req.continue, at: this.clock.now() });
    const step = this.lists.shift();
    if (!step) return hang(req.signal);
    if ('listError' in step) throw failure(step.listError);
    if ('list' in step) return structuredClone(step.list);
    throw new Error('unreachable');
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent>> {
    this.calls.push({
      kind: 'watch',
      path: req.path,
      resourceVersion: req.resourceVersion,
      timeoutSeconds: req.timeoutSeconds,
      allowWatchBookmarks: req.allowWatchBookmarks,
      at: this.clock.now(),
    });
    const step = this.watches.shift();
    if (!step) return hang(req.signal);
    if ('watchError' in step) throw failure(step.watchError);
    if (!('watch' in step)) throw new Error('unreachable');
    const items = structuredClone(step.watch);
    const clock = this.clock;
    return (async function* () {
      for (const item of items) {
        if (req.signal.aborted) throw abortError(req.signal);
        if ('wait' in item) await clock.sleep(item.wait, req.signal);
        else if ('silent' in item) await hang(req.signal);
        else if ('fail' in item) throw new Error(item.fail);
        else yield item;
      }
    })();
  }

  async ping(signal: AbortSignal): Promise<void> {
    this.calls.push({ kind: 'ping', at: this.clock.now() });
    return this.pingHandler(signal);
  }
}

interface OpenWatch {
  path: string;
  fieldSelector?: string;
  push(ev: WatchEvent): void;
  fail(e: Error): void;
}

/** A tiny in-memory apiserver: collections by path, one resourceVersion counter, live watches. */
export class FakeApiServer implements ListWatchSource {
  private rv = 100;
  private readonly collections = new Map<string, Map<string, RawObject>>();
  private readonly open = new Set<OpenWatch>();
  /** Every change, for watches that resume from a resourceVersion; `compact()` forgets it, as etcd does. */
  private history: { path: string; rv: number; ev: WatchEvent }[] = [];
  private compactedTo = 0;
  /** `up`: answers; `down`: refuses connections; `silent`: accepts and never answers. */
  mode: 'up' | 'down' | 'silent' = 'up';
  readonly calls: RecordedCall[] = [];
  /** How long each page of a list takes on the clock (a large cluster's initial list); with watch-lists, each initial event. */
  listPageDelayMs = 0;
  /**
   * Watch-lists (`sendInitialEvents`): `off` the source does not offer them (the default: lists), `on` it streams
   * them, `refused` it offers them and refuses the watch as a server with the WatchList feature off does (422),
   * `ignored` it offers them and serves a plain watch from now (a proxy that dropped the parameter).
   */
  watchList: 'off' | 'on' | 'refused' | 'ignored' = 'off';
  /** Continue tokens whose page fails once (the connection drops in the middle of a paginated list). */
  readonly failPages = new Set<number>();
  /** Paginated lists in progress: a continue token reads the snapshot its first page was taken from, as etcd does. */
  private readonly snapshots = new Map<string, { items: RawObject[]; rv: string }>();
  private listSeq = 0;

  constructor(private readonly clock: Clock) {}

  /** Creates or replaces an object (bumping its resourceVersion) and tells open watches. */
  put(path: string, object: RawObject): RawObject {
    const coll = this.collection(path);
    const key = objectKey(object);
    const stored = structuredClone(object);
    stored.metadata = { ...stored.metadata, resourceVersion: String(++this.rv) };
    const existed = coll.has(key);
    coll.set(key, stored);
    this.broadcast(path, { type: existed ? 'MODIFIED' : 'ADDED', object: stored });
    return stored;
  }

  /** Changes an object in place through `fn`. */
  update(path: string, key: string, fn: (o: RawObject) => void): RawObject {
    const cur = this.get(path, key);
    if (!cur) throw new Error(`no ${key} in ${path}`);
    const next = structuredClone(cur);
    fn(next);
    return this.put(path, next);
  }

  remove(path: string, key: string): void {
    const coll = this.collection(path);
    const cur = coll.get(key);
    if (!cur) return;
    coll.delete(key);
    const gone = structuredClone(cur);
    gone.metadata = { ...gone.metadata, resourceVersion: String(++this.rv) };
    this.broadcast(path, { type: 'DELETED', object: gone });
  }

  get(path: string, key: string): RawObject | undefined {
    return this.collection(path).get(key);
  }

  /** Sends an event to open watches of `path` as is (to replay odd streams). */
  inject(path: string, ev: WatchEvent): void {
    this.broadcast(path, ev);
  }

  /** Ends every open watch with an error, as a dying apiserver does. */
  dropWatches(message = 'connection reset'): void {
    for (const w of [...this.open]) w.fail(new Error(message));
  }

  /** Stops answering and cuts open watches (the process died). */
  stop(): void {
    this.mode = 'down';
    this.dropWatches('socket hang up');
  }

  start(): void {
    this.mode = 'up';
  }

  /** Forgets history: a watch resuming from before now gets 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedTo = this.rv;
  }

  get openWatches(): number {
    return this.open.size;
  }

  async list(req: ListRequest): Promise<ListPage> {
    this.calls.push({ kind: 'list', path: req.path, continue: req.continue, at: this.clock.now() });
    await this.gate(req.signal);
    if (this.listPageDelayMs) await this.clock.sleep(this.listPageDelayMs, req.signal);
    const [token, offset] = req.continue ? (req.continue.split(':') as [string, string]) : [`list-${++this.listSeq}`, '0'];
    let snap = this.snapshots.get(token);
    if (!snap) {
      if (req.continue) throw new ApiStatusError(410, 'the continue token has expired');
      const items = [...this.collection(req.path).values()].filter((o) => matchesField(o, req.fieldSelector));
      snap = { items: structuredClone(items), rv: String(this.rv) };
      this.snapshots.set(token, snap);
    }
    const from = Number(offset);
    if (this.failPages.delete(from)) throw new Error('connection reset by peer');
    const limit = req.limit > 0 ? req.limit : Infinity;
    const items = snap.items.slice(from, from + limit);
    const more = from + limit < snap.items.length;
    if (!more) this.snapshots.delete(token);
    return { items, resourceVersion: snap.rv, ...(more ? { continue: `${token}:${from + limit}` } : {}) };
  }

  async streamsInitialEvents(signal: AbortSignal): Promise<boolean> {
    await this.gate(signal);
    return this.watchList !== 'off';
  }

  async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent>> {
    this.calls.push({
      kind: req.sendInitialEvents ? 'watch-list' : 'watch',
      path: req.path,
      resourceVersion: req.resourceVersion,
      at: this.clock.now(),
    });
    await this.gate(req.signal);
    let queue: WatchEvent[];
    let initial: WatchEvent[] = [];
    if (req.sendInitialEvents && this.watchList !== 'ignored') {
      if (this.watchList !== 'on')
        throw new ApiStatusError(
          422,
          'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        );
      // the current state as ADDED events, then the bookmark that ends them; changes from then on
      initial = [...this.collection(req.path).values()]
        .filter((o) => matchesField(o, req.fieldSelector))
        .map((o) => ({ type: 'ADDED' as const, object: structuredClone(o) }));
      initial.push({
        type: 'BOOKMARK',
        object: { metadata: { resourceVersion: String(this.rv), annotations: { [INITIAL_EVENTS_END]: 'true' } } },
      });
      queue = [];
    } else {
      const from = Number(req.resourceVersion || this.rv);
      if (from < this.compactedTo) throw new ApiStatusError(410, `too old resource version: ${from} (${this.compactedTo})`);
      queue = this.history
        .filter((h) => h.path === req.path && h.rv > from && matchesField(h.ev.object, req.fieldSelector))
        .map((h) => structuredClone(h.ev));
    }
    let wakeUp: (() => void) | undefined;
    let error: Error | undefined;
    const w: OpenWatch = {
      path: req.path,
      fieldSelector: req.fieldSelector,
      push: (ev) => {
        queue.push(structuredClone(ev));
        wakeUp?.();
      },
      fail: (e) => {
        error = e;
        wakeUp?.();
      },
    };
    this.open.add(w);
    const onAbort = () => w.fail(abortError(req.signal));
    req.signal.addEventListener('abort', onAbort, { once: true });
    const open = this.open;
    const { clock, listPageDelayMs } = this;
    return (async function* () {
      try {
        for (const ev of initial) {
          if (listPageDelayMs && ev.type === 'ADDED') await clock.sleep(listPageDelayMs, req.signal);
          if (error) throw error;
          yield ev;
        }
        for (;;) {
          while (queue.length) yield queue.shift()!;
          if (error) throw error;
          await new Promise<void>((r) => (wakeUp = r));
          wakeUp = undefined;
        }
      } finally {
        open.delete(w);
        req.signal.removeEventListener('abort', onAbort);
      }
    })();
  }

  /** A bookmark at the current resourceVersion to every open watch of `path`, as the watch cache sends them. */
  bookmark(path: string): void {
    for (const w of this.open)
      if (w.path === path) w.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion: String(this.rv) } } });
  }

  async ping(signal: AbortSignal): Promise<void> {
    this.calls.push({ kind: 'ping', at: this.clock.now() });
    await this.gate(signal);
  }

  private async gate(signal: AbortSignal): Promise<void> {
    if (this.mode === 'down') throw new Error('connect ECONNREFUSED');
    if (this.mode === 'silent') await hang(signal);
  }

  private collection(path: string): Map<string, RawObject> {
    let c = this.collections.get(path);
    if (!c) this.collections.set(path, (c = new Map()));
    return c;
  }

  private broadcast(path: string, ev: WatchEvent): void {
    const rv = Number(ev.object.metadata?.resourceVersion);
    if (Number.isFinite(rv)) this.history.push({ path, rv, ev: structuredClone(ev) });
    for (const w of this.open) if (w.path === path && matchesField(ev.object, w.fieldSelector)) w.push(ev);
  }
}

/** Only `metadata.name=` and `metadata.namespace=` field selectors are understood; others match everything. */
function matchesField(o: RawObject, selector?: string): boolean {
  if (!selector) return true;
  return selector.split(',').every((part) => {
    const m = /^metadata\.(name|namespace)=(.*)$/.exec(part.trim());
    if (!m) return true;
    return o.metadata?.[m[1] as 'name' | 'namespace'] === m[2];
  });
}
