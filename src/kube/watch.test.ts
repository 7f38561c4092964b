import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { Backoff } from './backoff.js';
import { FakeApiServer, type ScriptStep, ScriptedSource } from '../testing/fake-source.js';
import type { RawObject, WatchEvent } from './source.js';
import { WatchHub } from './watch.js';
import type { Change, WatchOptions, WatchSpec } from './watch-types.js';

const PATH = '/api/v1/namespaces/default/endpoints';

interface Slim {
  name: string;
  addresses: number;
}

const spec: WatchSpec<Slim> = {
  key: 'endpoints',
  path: PATH,
  slim: (o) => ({ name: o.metadata?.name ?? '', addresses: Number((o as { n?: number }).n ?? 0) }),
};

const obj = (name: string, rv: number, n = 1): RawObject => ({ metadata: { name, namespace: 'default', resourceVersion: String(rv) }, n });
const ev = (type: WatchEvent['type'], name: string, rv: number, n = 1): WatchEvent => ({ type, object: obj(name, rv, n) });
const bookmark = (rv: number): WatchEvent => ({ type: 'BOOKMARK', object: { metadata: { resourceVersion: String(rv) } } });
const gone: WatchEvent = {
  type: 'ERROR',
  object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 3 (90)' },
};

const quiet: Partial<WatchOptions> = {
  random: () => 0,
  backoff: { initialMs: 800, maxMs: 30_000, resetAfterMs: 120_000, jitter: 0, random: () => 0 },
};

let hubs: WatchHub[] = [];
afterEach(() => {
  for (const h of hubs) h.close();
  hubs = [];
});

function setup(steps: ScriptStep[], options: Partial<WatchOptions> = {}) {
  const clock = new FakeClock();
  const source = new ScriptedSource(clock, steps);
  const log = memoryLogger();
  const hub = new WatchHub(source, clock, log, { ...quiet, ...options });
  hubs.push(hub);
  const w = hub.watch(spec);
  const changes: Change<Slim>[] = [];
  w.subscribe((c) => changes.push(c));
  return { clock, source, hub, w, changes, log };
}

/** A hub over a fake apiserver, closed after the test. */
function serverHub() {
  const clock = new FakeClock();
  const server = new FakeApiServer(clock);
  const hub = new WatchHub(server, clock, memoryLogger(), quiet);
  hubs.push(hub);
  return { clock, server, hub };
}

const watchCalls = (s: ScriptedSource) => s.calls.filter((c) => c.kind === 'watch');
const names = (w: { store: ReadonlyMap<string, Slim> }) => [...w.store.values()].map((o) => o.name).sort();

describe('the shared watch helper, on recorded streams', () => {
  it('lists, then watches from the list resourceVersion with bookmarks and a jittered timeout', async () => {
    const { clock, source, w, changes } = setup([
      { list: { items: [obj('a', 5)], resourceVersion: '10' } },
      { watch: [ev('ADDED', 'b', 11), ev('MODIFIED', 'a', 12, 3)] },
    ]);
    await clock.advance(10);
    expect(names(w)).toEqual(['a', 'b']);
    expect(w.store.get('default/a')?.addresses).toBe(3);
    const [first] = watchCalls(source);
    expect(first).toMatchObject({ resourceVersion: '10', allowWatchBookmarks: true });
    expect(first!.timeoutSeconds).toBeGreaterThanOrEqual(300);
    expect(first!.timeoutSeconds).toBeLessThan(600);
    expect(changes.map((c) => c.type)).toEqual(['added', 'synced', 'freshness', 'added', 'modified']);
    expect(w.freshness().fresh).toBe(true);
  });

  it('resumes after a closed stream from the newest resourceVersion seen, bookmarks included', async () => {
    const { clock, source, log } = setup([
      { list: { items: [], resourceVersion: '10' } },
      { watch: [ev('ADDED', 'a', 11), bookmark(40)] },
      { watch: [] },
    ]);
    await clock.advance(10);
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['10', '40', '40']);
    // a stream the apiserver ends long before its timeout (as one it finds too slow a reader) is said in the log
    expect(
      log.lines.filter((l) => l.level === 'debug' && l.msg.includes('the apiserver ended the stream after')).length,
    ).toBeGreaterThanOrEqual(2);
  });

  it('never goes back in time: a stream whose resourceVersions go backwards is not applied, and the resume point stays the newest', async () => {
    // Incident 2: deleting an old Service put a small resourceVersion at the end of the stream.
    const { clock, source, w, log } = setup([
      { list: { items: [obj('svc-a', 50), obj('svc-b', 60)], resourceVersion: '60' } },
      { watch: [ev('MODIFIED', 'svc-a', 70, 2), ev('DELETED', 'svc-b', 65), ev('ADDED', 'svc-old', 30)] },
    ]);
    await clock.advance(10);
    expect(names(w)).toEqual(['svc-a', 'svc-b']);
    expect(w.stats.replaysDropped).toBe(2);
    expect(w.resourceVersion).toBe('70');
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['60', '70']);
    expect(log.lines.some((l) => l.level === 'warn' && l.msg.includes('older than 70'))).toBe(true);
  });

  it('takes a bookmark at the resourceVersion already seen as "nothing new", not as a replay', async () => {
    const { clock, w, log } = setup([
      { list: { items: [obj('a', 10)], resourceVersion: '10' } },
      { watch: [bookmark(10), ev('MODIFIED', 'a', 11, 2), bookmark(11)] },
    ]);
    await clock.advance(10);
    expect(w.stats.replaysDropped).toBe(0);
    expect(w.resourceVersion).toBe('11');
    expect(log.lines.filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('refuses a relist older than what it has already seen and tries again', async () => {
    const { clock, source, w } = setup([
      { list: { items: [obj('a', 50)], resourceVersion: '50' } },
      { watch: [ev('ADDED', 'b', 80), gone] },
      { list: { items: [obj('a', 50)], resourceVersion: '40' } },
      { list: { items: [obj('a', 50), obj('b', 80)], resourceVersion: '90' } },
    ]);
    await clock.advance(10);
    expect(w.stats.staleListsRefused).toBe(1);
    expect(names(w)).toEqual(['a', 'b']);
    await clock.advance(1000);
    expect(source.calls.filter((c) => c.kind === 'list')).toHaveLength(3);
    expect(w.resourceVersion).toBe('90');
    expect(names(w)).toEqual(['a', 'b']);
  });

  it('relists on a 410 Gone in the middle of a stream and reports what vanished meanwhile', async () => {
    const { clock, source, w, changes } = setup([
      { list: { items: [obj('a', 5), obj('b', 6)], resourceVersion: '10' } },
      { watch: [ev('MODIFIED', 'a', 11, 2), gone, ev('ADDED', 'never', 12)] },
      { list: { items: [obj('a', 11, 2), obj('c', 95)], resourceVersion: '100' } },
      { watch: [ev('MODIFIED', 'c', 101, 4)] },
    ]);
    await clock.advance(10);
    expect(w.stats.gone).toBe(1);
    expect(names(w)).toEqual(['a', 'c']);
    expect(w.store.get('default/c')?.addresses).toBe(4);
    const relisted = changes.filter((c) => 'relist' in c && c.relist);
    expect(relisted.map((c) => `${c.type} ${'key' in c ? c.key : ''}`)).toEqual(['deleted default/b', 'added default/c']);
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['10', '100', '101']);
  });

  it('also relists when the watch request itself answers 410', async () => {
    const { clock, source, w } = setup([
      { list: { items: [], resourceVersion: '10' } },
      { watchError: { status: 410, message: 'Gone' } },
      { list: { items: [obj('z', 200)], resourceVersion: '200' } },
    ]);
    await clock.advance(10);
    expect(names(w)).toEqual(['z']);
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['10', '200']);
  });

  it('says unknown when a silent connection goes past its bound, then drops the dead stream and opens another', async () => {
    const { clock, source, w } = setup(
      [{ list: { items: [obj('a', 5)], resourceVersion: '10' } }, { watch: [{ silent: true }] }, { watch: [ev('ADDED', 'b', 11)] }],
      { inactivityMs: 60_000, pingAfterMs: 2_000, pingTimeoutMs: 2_000, staleAfterMs: 5_000 },
    );
    source.pingHandler = (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('timeout'))));
    await clock.advance(10);
    expect(w.freshness().fresh).toBe(true);
    let unknownAt: number | undefined;
    const start = clock.now();
    w.subscribe((c) => {
      if (c.type === 'freshness' && !c.fresh) unknownAt ??= clock.now();
    });
    await clock.runUntil(() => unknownAt !== undefined, 20_000, 100);
    expect(unknownAt! - start).toBeLessThanOrEqual(5_000);
    expect(w.freshness().reason).toMatch(/unreachable|nothing from the apiserver/);
    // the dead stream is dropped and, after the first back-off step, opened again
    await clock.advance(1_000);
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['10', '10', '11']);
    expect(names(w)).toEqual(['a', 'b']);
  });

  it('restarts a stream silent past the inactivity bound even while the apiserver answers pings', async () => {
    const { clock, source, w } = setup(
      [{ list: { items: [], resourceVersion: '10' } }, { watch: [{ silent: true }] }, { watch: [ev('ADDED', 'b', 11)] }],
      { inactivityMs: 30_000 },
    );
    await clock.advance(29_000);
    expect(watchCalls(source)).toHaveLength(1);
    expect(w.freshness().fresh).toBe(true);
    await clock.advance(1_500);
    expect(w.stats.inactivityRestarts).toBe(1);
    expect(names(w)).toEqual(['b']);
    expect(watchCalls(source).map((c) => c.resourceVersion)).toEqual(['10', '10', '11']);
  });

  it('backs off 0.8 s, 1.6 s, 3.2 s … up to 30 s between failures', async () => {
    const fail = { listError: { message: 'connect ECONNREFUSED' } };
    const { clock, source, w } = setup(Array.from({ length: 9 }, () => fail));
    await clock.advance(200_000);
    const lists = source.calls.filter((c) => c.kind === 'list').map((c) => c.at);
    const gaps = lists.slice(1).map((t, i) => t - lists[i]!);
    expect(gaps.slice(0, 8)).toEqual([800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
    expect(w.freshness()).toMatchObject({ fresh: false, synced: false });
  });

  it('shares one watch per key among probes and stops it when the last one lets go', async () => {
    const { clock, server, hub } = serverHub();
    const one = hub.watch(spec);
    const two = hub.watch(spec);
    await clock.advance(10);
    server.put(PATH, obj('a', 0));
    await clock.advance(10);
    expect(one.store.size).toBe(1);
    expect(two.store).toBe(one.store);
    expect(server.calls.filter((c) => c.kind === 'list')).toHaveLength(1);
    one.release();
    expect(hub.keys()).toEqual(['endpoints']);
    two.release();
    expect(hub.keys()).toEqual([]);
    await clock.advance(10);
    expect(server.openWatches).toBe(0);
  });

  it('goes unknown when the apiserver dies and fresh again when it is back, without waiting out the back-off', async () => {
    const { clock, server, hub } = serverHub();
    const w = hub.watch(spec);
    server.put(PATH, obj('a', 0));
    await clock.advance(10);
    expect(w.freshness().fresh).toBe(true);
    server.stop();
    await clock.advance(10);
    expect(w.freshness()).toMatchObject({ fresh: false, state: 'failing' });
    await clock.advance(120_000); // long outage: the back-off has grown to 30 s
    server.put(PATH, obj('b', 0));
    server.start();
    await clock.runUntil(() => w.freshness().fresh, 5_000, 100);
    expect(w.freshness().fresh).toBe(true);
    expect(clock.now()).toBeLessThan(Date.UTC(2026, 0, 1) + 120_000 + 10 + 5_000);
    expect(names(w)).toEqual(['a', 'b']);
  });
});

describe('Backoff', () => {
  it('starts over after a healthy period', () => {
    const b = new Backoff({ initialMs: 800, maxMs: 30_000, resetAfterMs: 60_000, jitter: 0, random: () => 0 });
    expect([b.next(), b.next(), b.next()]).toEqual([800, 1600, 3200]);
    b.healthyFor(59_000);
    expect(b.next()).toBe(6400);
    b.healthyFor(60_000);
    expect(b.next()).toBe(800);
  });

  it('stretches delays by the jitter, never past the cap', () => {
    const b = new Backoff({ initialMs: 800, maxMs: 30_000, resetAfterMs: 60_000, jitter: 0.5, random: () => 1 });
    expect(b.next()).toBe(1200);
    for (let i = 0; i < 10; i++) b.next();
    expect(b.next()).toBe(30_000);
  });
});
