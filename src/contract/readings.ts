import type { Ctx } from './context.js';
import { KrError, messageOf } from '../core/errors.js';
import type { Reading, ReadingStatus } from './probe.js';
import type { WatchHandle, WatchHub } from '../kube/watch.js';
import type { Change, WatchSpec } from '../kube/watch-types.js';

/** What the reading loop needs of a watch: its freshness, a wake-up on change, and letting go. */
export type Watched = Pick<WatchHandle<unknown>, 'key' | 'freshness' | 'release'> & { subscribe(fn: () => void): () => void };

/** A probe's verdict on the current state. */
export interface Judgement<V> {
  status: ReadingStatus;
  value: V;
  detail: string;
  /** Readings whose key changed are yielded at once; same-key refreshes at most every `refreshMs`. Default: status + detail. */
  key?: string;
  /** Judge again at this clock time even if nothing changes (a lease turning stale, a forecast coming due). */
  recheckAt?: number;
}

export interface ReactiveOptions<V> {
  /** Watches the judgement depends on; readings are unknown while any of them is not fresh. */
  watches: Watched[];
  judge(now: number): Judgement<V>;
  /** Same-key readings are not repeated more often than this (ms); default 1000. */
  refreshMs?: number;
  /**
   * Judge at most this often (ms; default 0): changes arriving closer together are judged together, the first one
   * at once. For a costly judgement over the whole fleet while thousands of nodes change at once.
   */
  minIntervalMs?: number;
  /** Releases extra resources when the probe stops. */
  onStop?(): void;
}

/** The run's watch hub, or a KrError saying why there is none. */
function hubOf(ctx: Ctx): WatchHub {
  const hub = ctx.kube.watches;
  if (!hub) throw new KrError('KUBE_NO_WATCHES', 'this cluster access has no watch hub', { exit: 3 });
  return hub;
}

/** One unknown reading, then silence until the run stops (the probe cannot see; it does not end). */
export async function* cannotSee(ctx: Ctx, e: unknown): AsyncGenerator<Reading<null>> {
  yield { status: 'unknown', at: ctx.clock.now(), value: null, detail: messageOf(e) };
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) return resolve();
    ctx.signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** One object's change as a watch event brought it (not a relist): `previous` is there when it was modified. */
export type ObjectChange<T> = { type: 'added' | 'modified' | 'deleted'; key: string; object: T; previous?: T };

/**
 * A watch as the reading loop sees it, woken by an object's change only when `matters` says it can change the
 * verdict (relists, sync and freshness always wake it). A large fleet's steady chatter, healthy nodes heartbeating,
 * then costs no judgement; changes that come with time still come from recheckAt.
 */
export function gated<T>(w: WatchHandle<T>, matters: (c: ObjectChange<T>) => boolean): Watched {
  return {
    key: w.key,
    freshness: () => w.freshness(),
    release: () => w.release(),
    subscribe: (fn) =>
      w.subscribe((c: Change<T>) => {
        if (!('object' in c) || c.relist || matters(c)) fn();
      }),
  };
}

export { sameLabels } from '../kube/labels.js';

/** The watches a probe reads, by the names it gives them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each spec keeps its own object type
type Specs = Record<string, WatchSpec<any>>;
export type Handles<S extends Specs> = { [K in keyof S]: S[K] extends WatchSpec<infer T> ? WatchHandle<T> : never };

/**
 * Opens the shared watches a probe reads (`specs` by name, or a function that works them out first) and yields
 * what `body` yields over them, releasing them when the probe stops. A probe that cannot watch (no hub, a spec
 * that cannot be worked out) reads unknown and stays so: it cannot see, it does not end.
 */
export async function* watching<S extends Specs, V = unknown>(
  ctx: Ctx,
  specs: S | (() => Promise<S>),
  body: (handles: Handles<S>, watches: Watched[]) => AsyncIterable<Reading<V | null>>,
): AsyncGenerator<Reading<V | null>> {
  const opened: WatchHandle<unknown>[] = [];
  const handles: Record<string, WatchHandle<unknown>> = {};
  try {
    const hub = hubOf(ctx);
    for (const [name, spec] of Object.entries(typeof specs === 'function' ? await specs() : specs)) {
      const h = hub.watch(spec);
      opened.push(h);
      handles[name] = h;
    }
  } catch (e) {
    for (const h of opened) h.release();
    yield* cannotSee(ctx, e);
    return;
  }
  try {
    yield* body(handles as Handles<S>, opened);
  } finally {
    for (const h of opened) h.release();
  }
}

/**
 * Readings driven by watch events (and by timers the judgement asks for), never by polling: every change wakes
 * the probe, which judges the shared stores and yields when the verdict changed. The first reading comes at
 * once (unknown until the watches are synced); while any watch is stale the reading is unknown.
 */
export async function* reactive<V>(ctx: Ctx, o: ReactiveOptions<V>): AsyncGenerator<Reading<V | null>> {
  const refreshMs = o.refreshMs ?? 1000;
  const minIntervalMs = o.minIntervalMs ?? 0;
  let lastJudgedAt = -Infinity;
  let dirty = true;
  let wake: (() => void) | undefined;
  // changes that woke the probe since it last judged (a timer wakes it too, without a change)
  let changes = 0;
  const poke = () => {
    dirty = true;
    wake?.();
  };
  const offs = o.watches.map((w) =>
    w.subscribe(() => {
      changes++;
      poke();
    }),
  );
  let cancelTimer: (() => void) | undefined;
  const onAbort = () => wake?.();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  let lastKey: string | undefined;
  let lastAt = -Infinity;
  try {
    while (!ctx.signal.aborted) {
      if (!dirty) await new Promise<void>((r) => (wake = r));
      wake = undefined;
      if (ctx.signal.aborted) break;
      const early = lastJudgedAt + minIntervalMs - ctx.clock.now();
      if (early > 0) {
        // judged a moment ago: what changes meanwhile is judged together when the interval is over
        await ctx.clock.sleep(early, ctx.signal).catch(() => {});
        if (ctx.signal.aborted) break;
      }
      dirty = false;
      const now = ctx.clock.now();
      const reading = judgeNow(o, now, ctx.profile, changes);
      // only a judgement made spaces the next: waiting for the watches to sync costs nothing, and the first reading
      // after they do comes at once
      if (reading.judged) lastJudgedAt = now;
      changes = 0;
      cancelTimer?.();
      cancelTimer = undefined;
      const due = lastKey === reading.key ? lastAt + refreshMs : now;
      if (due <= now) {
        lastKey = reading.key;
        lastAt = now;
        yield { status: reading.status, at: now, value: reading.value, detail: reading.detail };
      }
      const next = Math.min(due > now ? due : Infinity, reading.recheckAt ?? Infinity);
      if (Number.isFinite(next)) cancelTimer = ctx.clock.setTimer(Math.max(0, next - ctx.clock.now()), poke);
    }
  } finally {
    cancelTimer?.();
    ctx.signal.removeEventListener('abort', onAbort);
    for (const off of offs) off();
    for (const w of o.watches) w.release();
    o.onStop?.();
  }
}

/** The probe's judgement, or unknown while a watch is not fresh (`judged` false: the probe's judge was not called). */
function judgeNow<V>(
  o: ReactiveOptions<V>,
  now: number,
  profile: Ctx['profile'],
  changes: number,
): Judgement<V | null> & { key: string; judged: boolean } {
  for (const w of o.watches) {
    const f = w.freshness();
    if (!f.fresh) {
      const detail = f.synced ? `cannot see ${w.key}: ${f.reason}` : `waiting for ${w.key}: ${f.reason}`;
      return { status: 'unknown', value: null, detail, key: `unknown|${w.key}|${f.synced}|${f.state}`, judged: false };
    }
  }
  try {
    const j = profile ? profile.judge(() => o.judge(now), changes) : o.judge(now);
    return { ...j, key: j.key ?? `${j.status}|${j.detail}`, judged: true };
  } catch (e) {
    const detail = `cannot judge: ${messageOf(e)}`;
    return { status: 'unknown', value: null, detail, key: `unknown|${detail}`, judged: true };
  }
}

/**
 * For what has no event stream (health endpoints, metrics): calls `check` every `intervalMs` and yields its
 * reading when `key(reading)` changes, and otherwise at most once per max(1 s, interval), until ctx.signal aborts.
 */
export async function* polled<V>(
  ctx: Ctx,
  intervalMs: number,
  check: () => Promise<Reading<V>>,
  key: (r: Reading<V>) => string,
): AsyncGenerator<Reading<V>> {
  let last = '';
  let lastAt = -Infinity;
  while (!ctx.signal.aborted) {
    const r = await check();
    const k = key(r);
    if (k !== last || r.at - lastAt >= Math.max(1000, intervalMs)) {
      last = k;
      lastAt = r.at;
      yield r;
    }
    try {
      await ctx.clock.sleep(intervalMs, ctx.signal);
    } catch {
      return;
    }
  }
}
