import { afterEach, describe, expect, it } from 'vitest';
import { defineProbe } from './probe.js';
import { reactive, watching } from './readings.js';
import { watchSpecs } from '../kube/resources.js';
import { ProbeTester } from '../testing/probe-tester.js';
import { z } from 'zod';

let t: ProbeTester;
afterEach(async () => t.close());

/** Counts the Nodes, judged at most every `minIntervalMs`. */
const nodeCount = defineProbe({
  meta: { access: [], id: 'node-count', summary: 'test', description: 'test', params: z.strictObject({ minIntervalMs: z.number() }) },
  start: (ctx, params) =>
    watching(ctx, { nodes: watchSpecs.nodes() }, ({ nodes }, watches) =>
      reactive(ctx, {
        watches,
        minIntervalMs: params.minIntervalMs,
        judge: () => ({ status: 'ok', value: nodes.store.size, detail: `${nodes.store.size} nodes` }),
      }),
    ),
});

describe('reactive', () => {
  it('with minIntervalMs, judges a burst of changes together: the first at once, the rest when the interval is over', async () => {
    t = new ProbeTester();
    t.putNode('node-0');
    const run = t.start(nodeCount, { minIntervalMs: 250 });
    await run.until((r) => r.detail === '1 nodes');
    // half-way between the re-readings the probe makes every second while nothing changes
    await t.advance(1500);
    const before = t.judgements;
    const changesBefore = t.changesJudged;
    const burstAt = t.clock.now();
    t.putNode('node-1');
    await t.advance(0);
    for (let i = 2; i <= 100; i++) {
      t.putNode(`node-${i}`);
      await t.advance(1);
    }
    const last = await run.until((r) => r.detail === '101 nodes');
    expect(run.readings.find((r) => r.detail === '2 nodes')?.at).toBe(burstAt);
    expect(last.at - burstAt).toBeLessThanOrEqual(250 + 99);
    expect(t.judgements - before).toBeLessThanOrEqual(3);
    // each of the 100 Nodes added was taken in by one of those few judgements (what a benchmark divides their cost by)
    expect(t.changesJudged - changesBefore).toBe(100);
  });

  it('with minIntervalMs, reads at once when the watches have synced: waiting for them is no judgement', async () => {
    t = new ProbeTester();
    t.putNode('node-0');
    const run = t.start(nodeCount, { minIntervalMs: 250 });
    const first = await run.until((r) => r.status === 'ok');
    expect(run.readings[0]).toMatchObject({ status: 'unknown' });
    expect(first.at - run.readings[0]!.at).toBeLessThan(250);
  });

  it('without it, judges every change', async () => {
    t = new ProbeTester();
    const run = t.start(nodeCount, { minIntervalMs: 0 });
    await run.until((r) => r.status === 'ok');
    const before = t.judgements;
    for (let i = 1; i <= 20; i++) {
      t.putNode(`node-${i}`);
      await t.advance(1);
    }
    await run.until((r) => r.detail === '20 nodes');
    expect(t.judgements - before).toBe(20);
  });
});
