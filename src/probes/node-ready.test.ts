import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type NodeReadyValue } from './node-ready.js';

let t: ProbeTester;
afterEach(async () => t.close());

function setReady(name: string, status: 'True' | 'False' | 'Unknown') {
  t.api.update(paths.nodes, name, (n) => {
    const c = (n.status as { conditions: { status: string; lastTransitionTime: string }[] }).conditions[0]!;
    c.status = status;
    c.lastTransitionTime = new Date(t.clock.now()).toISOString();
  });
}

describe('node-ready', () => {
  it('counts Ready nodes and turns violated at once when one goes Unknown', async () => {
    t = new ProbeTester();
    for (const n of ['node-1', 'node-2', 'node-3']) t.putNode(n);
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('3/3 Ready');
    const flippedAt = t.clock.now();
    setReady('node-2', 'Unknown');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(flippedAt);
    expect(v.detail).toBe('2/3 Ready; not Ready: node-2 (Unknown)');
    expect((v.value as NodeReadyValue).nodes.find((n) => n.name === 'node-2')?.transitions).toBe(1);
  });

  it('tolerates allowNotReady nodes and ignores nodes outside the selector', async () => {
    t = new ProbeTester();
    for (const n of ['node-1', 'node-2', 'node-3']) t.putNode(n);
    t.putNode('node-9', { ready: 'False' });
    const run = t.start(probe, { nodes: { names: ['node-1', 'node-2'] }, allowNotReady: 1 });
    await run.until((r) => r.status === 'ok');
    setReady('node-1', 'False');
    await t.advance(100);
    expect(run.last()).toMatchObject({ status: 'ok', detail: '1/2 Ready; not Ready: node-1 (False)' });
    setReady('node-2', 'Unknown');
    await run.until((r) => r.status === 'violated');
  });

  it('calls a node flapping after N transitions within the window, even while it is Ready, until they age out', async () => {
    t = new ProbeTester();
    for (const n of ['node-1', 'node-2']) t.putNode(n);
    const run = t.start(probe, { flapping: { transitions: 3, window: '1m' } });
    await run.until((r) => r.status === 'ok');
    setReady('node-1', 'Unknown');
    await t.advance(10_000);
    setReady('node-1', 'True');
    await t.advance(10_000);
    setReady('node-1', 'Unknown');
    await t.advance(10_000);
    const first = t.clock.now();
    setReady('node-1', 'True');
    const v = await run.until((r) => r.status === 'violated' && r.detail.startsWith('2/2 Ready'));
    expect(v.detail).toBe('2/2 Ready; flapping (≥3 transitions in 1m): node-1');
    // four transitions; it stops flapping when the second leaves the 1-minute window
    const ok = await run.until((r) => r.status === 'ok', 120_000);
    expect(ok.at - (first - 20_000)).toBeGreaterThan(60_000);
    expect(ok.at - (first - 20_000)).toBeLessThanOrEqual(61_000);
  });
});
