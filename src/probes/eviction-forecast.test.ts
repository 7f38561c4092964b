import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import { ProbeTester, iso, rawLease } from '../testing/probe-tester.js';
import probe from './eviction-forecast.js';

let t: ProbeTester;
afterEach(async () => t.close());

const zones = { 'node-1': 'zone-a', 'node-2': 'zone-a', 'node-3': 'zone-b' } as const;

function setup() {
  t = new ProbeTester();
  for (const [n, zone] of Object.entries(zones)) {
    t.putNode(n, { labels: { 'topology.kubernetes.io/zone': zone } });
    t.renewLease(n);
    t.putPod('default', `web-${n}`, { node: n });
  }
}

/** From now on, `live` nodes renew their leases every 2 s, as kubelets do (the others have stopped). */
function kubelets(live: string[]) {
  const renew = () => {
    for (const n of live) t.renewLease(n);
    t.clock.setTimer(2000, renew);
  };
  t.clock.setTimer(2000, renew);
}

interface Value {
  earliestEviction: { pod: string; node: string; at: number } | null;
  nodes: { name: string; notReadyAt: number; taintAt?: number }[];
  masterDisruptionAt: number | null;
}

describe('eviction-forecast', () => {
  it('is ok while every node heartbeats', async () => {
    setup();
    kubelets(['node-1', 'node-2', 'node-3']);
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('no eviction predicted: 3 nodes heartbeating');
    expect(ok.value).toMatchObject({ sources: { nodeMonitorGracePeriodMs: 'inventory' }, settings: { nodeMonitorGracePeriodMs: 8000 } });
  });

  it('sees a node go silent and predicts its NotReady and first eviction; violated once within margin', async () => {
    setup();
    const lastRenewal = t.clock.now();
    const run = t.start(probe, { margin: '20s' });
    kubelets(['node-2', 'node-3']);
    const seen = await run.until((r) => r.detail.startsWith('first eviction'));
    // silent after 2 × the 2 s renew interval
    expect(seen.at - lastRenewal).toBe(4001);
    expect(seen.status).toBe('ok');
    const v = seen.value as Value;
    expect(v.nodes.map((n) => [n.name, n.notReadyAt - lastRenewal, n.taintAt! - lastRenewal])).toEqual([['node-1', 8000, 9000]]);
    expect(v.earliestEviction).toMatchObject({ pod: 'default/web-node-1', node: 'node-1', at: lastRenewal + 39_000 });
    // the controller acts a little later than the earliest it could: NotReady at +8.6 s, tainted at +9.6 s
    await t.advance(lastRenewal + 8_600 - t.clock.now());
    t.api.update(paths.nodes, 'node-1', (n) => {
      const c = (n.status as { conditions: Record<string, string>[] }).conditions[0]!;
      Object.assign(c, { status: 'Unknown', lastTransitionTime: iso(t.clock.now()) });
    });
    await t.advance(1_000);
    t.api.update(paths.nodes, 'node-1', (n) => {
      (n.spec as { taints: unknown[] }).taints.push({ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: iso(t.clock.now()) });
    });
    const violated = await run.until((r) => r.status === 'violated', 60_000);
    expect(violated.at).toBe(lastRenewal + 9_600 + 30_000 - 20_000);
    expect(violated.detail).toBe('first eviction in 20s: default/web-node-1 on node-1 (1 pod at risk on 1 node)');
  });

  it('keeps the first taint time while the controller refreshes the taint of a node that stays down', async () => {
    setup();
    const run = t.start(probe, { margin: '5m' });
    kubelets(['node-2', 'node-3']);
    await run.until((r) => r.status === 'ok');
    const setTaint = () =>
      t.api.update(paths.nodes, 'node-1', (n) => {
        const c = (n.status as { conditions: Record<string, string>[] }).conditions[0]!;
        Object.assign(c, { status: 'Unknown' });
        (n.spec as { taints: unknown[] }).taints = [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: iso(t.clock.now()) }];
      });
    setTaint();
    const taintedAt = t.clock.now();
    await t.advance(10_000);
    setTaint(); // the controller re-adds it with a new timeAdded; the taint manager keeps its first schedule
    await t.advance(1_000);
    const v = run.last()!.value as Value;
    expect(v.earliestEviction?.at).toBe(taintedAt + 30_000);
  });

  it('predicts no eviction when every node is silent (master disruption mode)', async () => {
    setup();
    const run = t.start(probe, { margin: '5m' });
    await run.until((r) => r.status === 'ok');
    const r = await run.until((x) => x.detail.includes('master disruption'));
    expect(r.status).toBe('ok');
    expect((r.value as Value).earliestEviction).toBeNull();
    expect(run.readings.filter((x) => x.status === 'violated')).toEqual([]);
  });

  it('lists the first 20 pods to be evicted of all it counts', async () => {
    t = new ProbeTester();
    const names = Array.from({ length: 14 }, (_, i) => `node-${String(i + 1).padStart(2, '0')}`);
    for (const n of [...names, 'healthy']) {
      t.putNode(n, { labels: { 'topology.kubernetes.io/zone': n === 'healthy' ? 'zone-b' : 'zone-a' } });
      t.renewLease(n);
      for (let i = 0; i < 3; i++) t.putPod('default', `web-${n}-${i}`, { node: n });
    }
    kubelets(['healthy']);
    const run = t.start(probe, { margin: '1s' });
    const r = await run.until((x) => x.detail.includes('at risk on 14 nodes'));
    expect(r.detail).toMatch(/^first eviction in .*: default\/web-node-01-0 on node-01 \(42 pods at risk on 14 nodes\)$/);
    const v = r.value as { nodes: { name: string }[]; pods: { key: string }[]; atRisk: number };
    expect([v.nodes.length, v.atRisk, v.pods.length]).toEqual([14, 42, 20]);
    expect(v.pods.slice(0, 4).map((p) => p.key)).toEqual(['default/web-node-01-0', 'default/web-node-01-1', 'default/web-node-01-2', 'default/web-node-02-0']);
  });

  it('counts only the pods on the nodes selected, and judges zones on every node', async () => {
    setup();
    t.putPod('default', 'api-node-1', { node: 'node-1' });
    const run = t.start(probe, { margin: '5m', nodes: { names: ['node-2', 'node-3'] } });
    kubelets(['node-3']);
    const r = await run.until((x) => x.detail.startsWith('first eviction'));
    const v = r.value as Value & { pods: { key: string; node: string }[]; atRisk: number };
    // node-1 and node-2 both silent: the zone's two nodes down, but only node-2's pod counts
    expect(v.nodes.map((n) => n.name)).toEqual(['node-1', 'node-2']);
    expect([v.atRisk, v.pods.map((p) => p.key)]).toEqual([1, ['default/web-node-2']]);
    expect(v.earliestEviction).toMatchObject({ pod: 'default/web-node-2', node: 'node-2' });
  });

  it('names at most ten failing nodes in its detail', async () => {
    t = new ProbeTester();
    // 14 of 17 nodes of a small zone down: partially disrupted, the controller taints none
    const names = Array.from({ length: 14 }, (_, i) => `node-${String(i + 1).padStart(2, '0')}`);
    const live = ['node-15', 'node-16', 'node-17'];
    for (const n of [...names, ...live]) {
      t.putNode(n, { labels: { 'topology.kubernetes.io/zone': 'zone-a' } });
      t.renewLease(n);
      t.putPod('default', `web-${n}`, { node: n });
    }
    kubelets(live);
    const run = t.start(probe, {});
    const held = await run.until((x) => x.detail.startsWith('no eviction predicted; failing:'));
    expect(held.detail).toBe(`no eviction predicted; failing: ${names.slice(0, 10).join(', ')} and 4 more`);
    expect((held.value as { nodes: unknown[] }).nodes).toHaveLength(14);
  });

  it('lists the first 100 failing nodes by name in its value and counts them all', async () => {
    t = new ProbeTester();
    // 130 of 140 nodes down in zone-a; zone-b is up
    const names = Array.from({ length: 130 }, (_, i) => `node-${String(i + 1).padStart(3, '0')}`);
    const live = Array.from({ length: 10 }, (_, i) => `up-${i}`);
    for (const n of [...names, ...live]) {
      t.putNode(n, { labels: { 'topology.kubernetes.io/zone': n.startsWith('up') ? 'zone-b' : 'zone-a' } });
      t.renewLease(n);
    }
    t.putPod('default', 'web-last', { node: 'node-130' });
    kubelets(live);
    const run = t.start(probe, {});
    const seen = await run.until((x) => x.detail.includes('on 1 node'));
    const v = seen.value as Value & { failingNodes: number; healthyNodes: number };
    expect(v.failingNodes).toBe(130);
    expect(v.healthyNodes).toBe(10);
    expect(v.nodes.map((n) => n.name)).toEqual(names.slice(0, 100));
    // the pod on a node beyond those listed is judged all the same
    expect(v.earliestEviction).toMatchObject({ pod: 'default/web-last', node: 'node-130' });
  });

  it('predicts the evictions on a taint the controller kept as every zone went down, with no further event', async () => {
    setup();
    const run = t.start(probe, { margin: '5m' });
    await run.until((r) => r.status === 'ok');
    await t.advance(9_000);
    // every node NotReady in one pass; node-1 was tainted in that pass and the controller left its taint on
    const down = t.clock.now();
    for (const n of Object.keys(zones))
      t.api.update(paths.nodes, n, (node) => {
        const c = (node.status as { conditions: Record<string, string>[] }).conditions[0]!;
        Object.assign(c, { status: 'Unknown', lastTransitionTime: iso(down) });
        if (n === 'node-1') (node.spec as { taints: unknown[] }).taints.push({ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: iso(down) });
      });
    await t.advance(500);
    expect((run.last()!.value as Value).earliestEviction).toBeNull();
    const kept = await run.until((r) => (r.value as Value | null)?.earliestEviction !== null, 5_000);
    // judged again on its own once the taint outlived the pass: a second (rounding) and a monitor period
    expect(kept.at).toBe(down + 2_000);
    expect((kept.value as Value).earliestEviction).toMatchObject({ node: 'node-1', pod: 'default/web-node-1', at: down + 30_000 });
  });

  it('says evictions are frozen while no controller-manager holds its leader lease', async () => {
    setup();
    t.api.put('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases', rawLease('kube-system', 'kube-controller-manager', t.clock.now(), 15, 'cp-1_abc'));
    const run = t.start(probe, { margin: '5m' });
    kubelets(['node-2', 'node-3']);
    await run.until((r) => r.status === 'ok');
    await run.until((r) => r.status === 'violated');
    const frozen = await run.until((r) => r.detail.startsWith('no eviction: no kube-controller-manager'));
    expect(frozen.status).toBe('ok');
  });

  it('is unknown while the apiserver is away', async () => {
    setup();
    kubelets(['node-1', 'node-2', 'node-3']);
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    t.api.stop();
    await run.until((r) => r.status === 'unknown', 5_000);
    t.api.start();
    await run.until((r) => r.status !== 'unknown', 5_000);
  });
});
