import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import { ProbeTester, iso } from '../testing/probe-tester.js';
import probe, { type TaintedNode } from './noexecute-taints.js';

let t: ProbeTester;
afterEach(async () => t.close());

function taint(name: string, key: string, effect = 'NoExecute') {
  t.api.update(paths.nodes, name, (n) => {
    (n.spec as { taints: unknown[] }).taints.push({ key, effect, timeAdded: iso(t.clock.now()) });
  });
}

describe('noexecute-taints', () => {
  it('reports when the unreachable NoExecute taint lands on a node and since when', async () => {
    t = new ProbeTester();
    for (const n of ['node-1', 'node-2']) t.putNode(n);
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('no NoExecute taint on 2 nodes');
    taint('node-1', 'node.kubernetes.io/unreachable', 'NoSchedule');
    await t.advance(1000);
    expect(run.last()?.status).toBe('ok');
    const addedAt = t.clock.now();
    taint('node-1', 'node.kubernetes.io/unreachable');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(addedAt);
    expect((v.value as { tainted: TaintedNode[] }).tainted).toEqual([{ node: 'node-1', key: 'node.kubernetes.io/unreachable', addedAt }]);
    expect(v.detail).toBe('node-1 unreachable since 0ms');
  });

  it('allows up to max tainted nodes and only looks at the selected ones and keys', async () => {
    t = new ProbeTester();
    for (const n of ['node-1', 'node-2', 'node-3']) t.putNode(n);
    const run = t.start(probe, { max: 1, nodes: { names: ['node-1', 'node-2'] } });
    await run.until((r) => r.status === 'ok');
    taint('node-3', 'node.kubernetes.io/not-ready');
    taint('node-1', 'node.kubernetes.io/not-ready');
    taint('node-2', 'example.com/maintenance');
    await t.advance(100);
    expect(run.last()).toMatchObject({ status: 'ok', value: { nodes: 1 } });
    taint('node-2', 'node.kubernetes.io/unreachable');
    await run.until((r) => r.status === 'violated');
  });
});
