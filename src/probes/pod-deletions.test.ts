import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import { ProbeTester, iso } from '../testing/probe-tester.js';
import type { Deletion } from '../kube/deletions.js';
import probe from './pod-deletions.js';

let t: ProbeTester;
afterEach(async () => t.close());

const deletions = (r: { value: unknown }) => (r.value as { deletions: Deletion[] }).deletions;

function setup() {
  t = new ProbeTester();
  for (const n of ['node-1', 'node-2']) t.putNode(n);
  t.putPod('default', 'web-1', { node: 'node-1' });
  t.putPod('default', 'web-2', { node: 'node-2' });
  t.putPod('kube-system', 'dns-1', { node: 'node-1', labels: { app: 'dns' } });
  t.putPod('default', 'pending-1', {});
}

describe('pod-deletions', () => {
  it('counts a pod getting a deletionTimestamp the moment it happens and tells a taint eviction by its timing', async () => {
    setup();
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    const taintedAt = t.clock.now();
    t.api.update(paths.nodes, 'node-1', (n) => {
      (n.spec as { taints: unknown[] }).taints.push({
        key: 'node.kubernetes.io/unreachable',
        effect: 'NoExecute',
        timeAdded: iso(taintedAt),
      });
    });
    await t.advance(30_000);
    const deletedAt = t.clock.now();
    t.terminatePod('default', 'web-1', 30);
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(deletedAt);
    expect(deletions(v)).toEqual([{ pod: 'default/web-1', node: 'node-1', at: deletedAt, how: 'terminating', cause: 'taint-eviction' }]);
    expect(v.detail).toBe('1 pod deleted (1 taint-eviction): default/web-1 on node-1');
  });

  it('on a server that writes DisruptionTarget (1.26+), reads the cause from the condition and never infers it from timing', async () => {
    setup();
    t.kube.rawHandler = (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.37.2"}' } : { status: 404, body: '' });
    const run = t.start(probe, { max: 5 });
    await run.until((r) => r.status === 'ok');
    for (const n of ['node-1', 'node-2'])
      t.api.update(paths.nodes, n, (o) => {
        (o.spec as { taints: unknown[] }).taints.push({
          key: 'node.kubernetes.io/unreachable',
          effect: 'NoExecute',
          timeAdded: iso(t.clock.now()),
        });
      });
    await t.advance(400_000);
    // both come after the toleration ran out: only the one the taint-eviction controller marked is its eviction
    t.terminatePod('default', 'web-1', 30, [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByTaintManager' }]);
    t.terminatePod('default', 'web-2', 30);
    const v = await run.until((r) => deletions(r).length === 2);
    expect(deletions(v).map((d) => `${d.pod} ${d.cause}`)).toEqual(['default/web-1 taint-eviction', 'default/web-2 delete']);
    expect(t.kube.rawCalls).toContain('/version');
  });

  it('tells a device taint eviction (1.36+) from a node taint eviction by the DisruptionTarget reason', async () => {
    setup();
    t.kube.rawHandler = (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.37.2"}' } : { status: 404, body: '' });
    const run = t.start(probe, { max: 5 });
    await run.until((r) => r.status === 'ok');
    // no node taint at all: only the device taint eviction controller's mark tells the cause
    t.terminatePod('default', 'web-1', 30, [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByDeviceTaintManager' }]);
    t.terminatePod('default', 'web-2', 30, [{ type: 'DisruptionTarget', status: 'True', reason: 'DeletionByTaintManager' }]);
    const v = await run.until((r) => deletions(r).length === 2);
    expect(deletions(v).map((d) => `${d.pod} ${d.cause}`)).toEqual(['default/web-1 device-taint-eviction', 'default/web-2 taint-eviction']);
    expect(v.detail).toBe('2 pods deleted (1 device-taint-eviction, 1 taint-eviction): default/web-1 on node-1, default/web-2 on node-2');
  });

  it('tells a taint eviction that comes late (a restarted controller-manager starts its timers afresh) from a delete that comes too early', async () => {
    setup();
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    const taintedAt = t.clock.now();
    for (const n of ['node-1', 'node-2'])
      t.api.update(paths.nodes, n, (o) => {
        (o.spec as { taints: unknown[] }).taints.push({
          key: 'node.kubernetes.io/unreachable',
          effect: 'NoExecute',
          timeAdded: iso(taintedAt),
        });
      });
    await t.advance(10_000);
    t.terminatePod('default', 'web-2', 30); // 10 s after the taint, 300 s toleration: not the taint manager
    await t.advance(400_000);
    t.terminatePod('default', 'web-1', 30); // long after the toleration ran out
    const v = await run.until((r) => deletions(r).length === 2);
    expect(deletions(v).map((d) => `${d.pod} ${d.cause}`)).toEqual(['default/web-2 delete', 'default/web-1 taint-eviction']);
  });

  it('still tells a taint eviction when the controller has refreshed the taint since (it re-adds it while the node stays down)', async () => {
    setup();
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    const taint = () =>
      t.api.update(paths.nodes, 'node-1', (o) => {
        (o.spec as { taints: unknown[] }).taints = [
          { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: iso(t.clock.now()) },
        ];
      });
    taint();
    for (let i = 0; i < 3; i++) {
      await t.advance(10_000);
      taint();
    }
    t.terminatePod('default', 'web-1', 30); // 30 s after the first taint: its toleration ran out
    const v = await run.until((r) => r.status === 'violated');
    expect(deletions(v).map((d) => d.cause)).toEqual(['taint-eviction']);
  });

  it('tells an API eviction and a plain delete apart, counts each pod once, ignores unbound pods', async () => {
    setup();
    const run = t.start(probe, { max: 1 });
    await run.until((r) => r.status === 'ok');
    t.terminatePod('default', 'web-2', 30, [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }]);
    t.terminatePod('default', 'pending-1', 30);
    await t.advance(100);
    expect(run.last()).toMatchObject({ status: 'ok', value: { count: 1 } });
    t.api.remove(paths.pods, 'default/web-2');
    t.terminatePod('kube-system', 'dns-1', 0);
    const v = await run.until((r) => r.status === 'violated');
    expect(deletions(v).map((d) => [d.pod, d.cause])).toEqual([
      ['default/web-2', 'api-eviction'],
      ['kube-system/dns-1', 'delete'],
    ]);
  });

  it('filters by namespace, labels and nodes', async () => {
    setup();
    const run = t.start(probe, { namespaces: ['default'], labelSelector: 'app=web', nodes: { names: ['node-2'] } });
    await run.until((r) => r.status === 'ok');
    t.terminatePod('default', 'web-1');
    t.terminatePod('kube-system', 'dns-1');
    await t.advance(100);
    expect(run.last()?.status).toBe('ok');
    t.terminatePod('default', 'web-2');
    await run.until((r) => r.status === 'violated');
  });

  it('does not count pods already terminating when it starts, and counts pods that vanished while the apiserver was away', async () => {
    setup();
    t.terminatePod('default', 'web-2');
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    t.api.stop();
    await run.until((r) => r.status === 'unknown', 10_000);
    t.api.remove(paths.pods, 'default/web-1');
    t.api.start();
    const v = await run.until((r) => r.status === 'violated', 40_000);
    expect(deletions(v).map((d) => [d.pod, d.how, d.cause])).toEqual([['default/web-1', 'vanished', 'unknown']]);
  });
});
