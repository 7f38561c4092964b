import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeApiServer } from '../testing/fake-source.js';
import type { RawObject } from './source.js';
import { WatchHub } from './watch.js';
import type { Change, WatchSpec } from './watch-types.js';

/** Watch-lists: the initial state as a watch's initial events, where the apiserver streams them. */

const PATH = '/api/v1/namespaces/default/configmaps';
const spec: WatchSpec<{ name: string; v: string }> = {
  key: 'configmaps',
  path: PATH,
  slim: (o) => ({ name: o.metadata?.name ?? '', v: String((o as { data?: { v?: string } }).data?.v ?? '') }),
};
const cm = (name: string, v = '1'): RawObject => ({ metadata: { name, namespace: 'default' }, data: { v } });

let hub: WatchHub | undefined;
afterEach(() => hub?.close());

function setup(mode: FakeApiServer['watchList']) {
  const clock = new FakeClock();
  const server = new FakeApiServer(clock);
  server.watchList = mode;
  for (const n of ['a', 'b', 'c']) server.put(PATH, cm(n));
  const log = memoryLogger();
  hub = new WatchHub(server, clock, log, { random: () => 0.5 });
  const w = hub.watch(spec);
  const changes: Change<{ name: string; v: string }>[] = [];
  w.subscribe((c) => changes.push(c));
  return { clock, server, w, changes, log };
}

describe('watch-list', () => {
  it('reads the initial state from one stream, which then carries the changes: no list, no second watch', async () => {
    const { clock, server, w, changes } = setup('on');
    await clock.advance(10);
    expect(w.freshness()).toMatchObject({ synced: true, fresh: true, state: 'watching' });
    expect([...w.store.keys()]).toEqual(['default/a', 'default/b', 'default/c']);
    expect(changes.filter((c) => c.type !== 'freshness').map((c) => c.type)).toEqual(['added', 'added', 'added', 'synced']);
    server.put(PATH, cm('b', '2'));
    server.remove(PATH, 'default/c');
    await clock.advance(10);
    expect([...w.store.values()]).toEqual([
      { name: 'a', v: '1' },
      { name: 'b', v: '2' },
    ]);
    expect(server.calls.map((c) => c.kind)).toEqual(['watch-list']);
    expect(w.stats).toMatchObject({ lists: 0, streamedLists: 1, watches: 1 });
  });

  it('lists instead when the apiserver refuses to stream initial events (the WatchList feature off), and does not ask again', async () => {
    const { clock, server, w, log } = setup('refused');
    await clock.advance(10);
    expect(w.freshness()).toMatchObject({ synced: true, fresh: true });
    expect(w.store.size).toBe(3);
    server.dropWatches();
    await clock.advance(5_000);
    server.put(PATH, cm('d'));
    await clock.advance(10);
    expect(w.store.size).toBe(4);
    expect(server.calls.map((c) => c.kind).filter((k) => k !== 'ping')).toEqual(['watch-list', 'list', 'watch', 'watch']);
    expect(log.lines.map((l) => l.msg).join('\n')).toContain('does not stream initial events');
  });

  it('lists instead when the stream carries a bookmark before any end of initial events (the parameter ignored on the way)', async () => {
    const { clock, server, w, log } = setup('ignored');
    await clock.advance(10);
    expect(w.freshness()).toMatchObject({ synced: false });
    server.bookmark(PATH);
    await clock.advance(5_000);
    expect(w.freshness()).toMatchObject({ synced: true, fresh: true });
    expect([...w.store.keys()]).toEqual(['default/a', 'default/b', 'default/c']);
    expect(server.calls.map((c) => c.kind).filter((k) => k !== 'ping')).toEqual(['watch-list', 'list', 'watch']);
    expect(log.lines.map((l) => l.msg).join('\n')).toContain('a bookmark that does not end them among the initial events');
  });

  it('does not start a watch-list over when a ping goes unanswered while its initial events still come (a busy apiserver)', async () => {
    const { clock, server, w } = setup('on');
    // 3 s between initial events: the apiserver is silent for longer than a ping waits
    server.listPageDelayMs = 3_000;
    await clock.advance(10);
    server.mode = 'silent';
    await clock.advance(5_000);
    expect(w.freshness()).toMatchObject({ synced: false, fresh: false });
    await clock.advance(5_000);
    expect(w.freshness()).toMatchObject({ synced: true });
    expect([...w.store.keys()]).toEqual(['default/a', 'default/b', 'default/c']);
    expect(server.calls.filter((c) => c.kind === 'watch-list')).toHaveLength(1);
    expect(w.stats.streamedLists).toBe(1);
  });

  it('keeps nothing of a stream cut before its end bookmark: not synced, and the next stream starts over', async () => {
    const { clock, server, w, changes } = setup('on');
    server.listPageDelayMs = 1000;
    await clock.advance(2_500);
    expect(w.store.size).toBe(0);
    server.dropWatches('connection reset by peer');
    await clock.advance(10);
    expect(w.freshness()).toMatchObject({ synced: false, fresh: false });
    expect(changes.filter((c) => c.type !== 'freshness')).toEqual([]);
    await clock.advance(10_000);
    expect(w.freshness()).toMatchObject({ synced: true });
    expect(w.store.size).toBe(3);
    expect(server.calls.filter((c) => c.kind === 'watch-list').length).toBe(2);
  });
});
