import { describe, expect, it } from 'vitest';
import { simSettings } from './lifecycle-settings.js';
import { type SimNode, simulateController } from './controller-sim.js';
import { TimedQueue } from './timed-queue.js';

const START = Date.UTC(2026, 10, 1, 12, 0, 0);
const settings = simSettings;

describe('the UniqueQueue', () => {
  it('keeps a name off the heap twice only while the set holds it', () => {
    const q = new TimedQueue();
    expect(q.add('a', 1)).toBe(true);
    expect(q.add('a', 2)).toBe(false);
    q.setRemove('a');
    expect(q.add('a', 3)).toBe(true);
    expect(q.add('b', 2)).toBe(true);
    expect(q.size).toBe(3);
    // RemoveFromQueue: the first entry off the heap, the name kept in the set
    expect(q.removeFromQueue('a')).toBe(true);
    expect(q.head()).toEqual({ name: 'b', at: 2 });
    expect(q.add('a', 4)).toBe(false);
    // Remove: off the set and one entry; a name not in the set is left where it is
    expect(q.remove('b')).toBe(true);
    expect(q.remove('b')).toBe(false);
    expect(q.head()).toEqual({ name: 'a', at: 3 });
    q.setRemove('a');
    expect(q.removeFromQueue('a')).toBe(false);
    expect(q.size).toBe(1);
  });

  it('hands out entries by time, whatever order they came in', () => {
    const q = new TimedQueue();
    const ats = [5, 3, 9, 1, 7, 2, 8, 6, 4];
    for (const at of ats) q.add(`n${at}`, at);
    q.remove('n7');
    const out: number[] = [];
    for (let h = q.head(); h; h = q.head()) {
      out.push(h.at);
      q.removeFromQueue(h.name);
    }
    expect(out).toEqual([1, 2, 3, 4, 5, 6, 8, 9]);
  });
});

describe('the controller stand-in, 1.20 against later releases', () => {
  // a zone of 20: two kubelets stop at once, a third 15 s later; the zone stays Normal (0.1 taints a second)
  const nodes: SimNode[] = Array.from({ length: 20 }, (_, i) => ({
    name: `node-${String(i).padStart(2, '0')}`,
    zone: 'zone-a',
    ...(i < 2 ? { stopsAt: START + 10_000 } : i === 2 ? { stopsAt: START + 25_000 } : {}),
  }));
  const run = (requeue: boolean, seed: number) =>
    simulateController({
      settings,
      requeue,
      taintsInTheSamePass: requeue,
      nodes,
      pods: [],
      seed,
      start: START,
      end: START + 300_000,
      lookAt: [],
      look: () => undefined,
    });

  it('on 1.20 re-taints a tainted node from its leftover entries, each a token, and the node after it waits', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const old = run(false, seed);
      const later = run(true, seed);
      const second = [...old.tainted].sort((a, b) => a[1] - b[1])[1]![0];
      // the second node stopped waited a token (10 s): one entry per pass until then, the leftovers popped after it
      const retaints = old.taints.filter((t) => t.node === second).length - 1;
      expect(retaints, `seed ${seed}`).toBeGreaterThanOrEqual(7);
      // the taints stay a token apart
      for (let i = 1; i < old.taints.length; i++) expect(old.taints[i]!.at - old.taints[i - 1]!.at).toBeGreaterThanOrEqual(10_000 - 1);
      // the third node, queued behind the leftovers, is tainted after them; on later releases the next token is its
      expect(old.tainted.get('node-02')! - later.tainted.get('node-02')!, `seed ${seed}`).toBeGreaterThan(40_000);
      expect(later.taints.length).toBe(later.tainted.size);
    }
  });
});
