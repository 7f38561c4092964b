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
    // silent after its 8 s lease less a renewal before the 8 s grace runs out
    expect(seen.at - lastRenewal).toBe(6001);
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
      (n.spec as { taints: unknown[] }).taints.push({
        key: 'node.kubernetes.io/unreachable',
        effect: 'NoExecute',
        timeAdded: iso(t.clock.now()),
      });
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
        (n.spec as { taints: unknown[] }).taints = [
          { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: iso(t.clock.now()) },
        ];
      });
    setTaint();
    const taintedAt = t.clock.now();
    await t.advance(10_000);
    setTaint(); // the controller re-adds it with a new timeAdded; the taint manager keeps its first schedule
    await t.advance(1_000);
    const v = run.last()!.value as Value;
    expect(v.earliestEviction?.at).toBe(taintedAt + 30_000);
  });

  it('when every node is silent (master disruption mode), predicts only evictions on a taint its last pass may keep, likely none', async () => {
    setup();
    const run = t.start(probe, { margin: '10s' });
    await run.until((r) => r.status === 'ok');
    const r = await run.until((x) => x.detail.includes('master disruption'));
    // all three fell silent together: any of them may be tainted in the pass that enters the mode, and keep it
    expect(r.detail).toMatch(
      /^first eviction in 3\d(\.\d)?s, likely spared: default\/web-node-1 on node-1 \(3 pods at risk on 3 nodes\); all zones down: master disruption mode$/,
    );
    expect((r.value as Value).earliestEviction).toMatchObject({ pod: 'default/web-node-1' });
    expect((r.value as { earliestEviction: { likely?: number } }).earliestEviction.likely).toBeUndefined();
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
    expect(v.pods.slice(0, 4).map((p) => p.key)).toEqual([
      'default/web-node-01-0',
      'default/web-node-01-1',
      'default/web-node-01-2',
      'default/web-node-02-0',
    ]);
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
    // 14 of 17 nodes of a small zone down: partially disrupted, the controller taints none after the pass that marks
    // them (during it, one at the zone's old rate), and their pods tolerate every taint
    const names = Array.from({ length: 14 }, (_, i) => `node-${String(i + 1).padStart(2, '0')}`);
    const live = ['node-15', 'node-16', 'node-17'];
    for (const n of [...names, ...live]) {
      t.putNode(n, { labels: { 'topology.kubernetes.io/zone': 'zone-a' } });
      t.renewLease(n);
      t.putPod('default', `web-${n}`, { node: n, tolerations: [{ operator: 'Exists' }] });
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
        if (n === 'node-1')
          (node.spec as { taints: unknown[] }).taints.push({
            key: 'node.kubernetes.io/unreachable',
            effect: 'NoExecute',
            timeAdded: iso(down),
          });
      });
    await t.advance(500);
    // the taint may be one the controller keeps: evicted at the earliest, likely not
    const likely = (r: { value: unknown }) =>
      (r.value as { earliestEviction: { likely?: number } | null } | null)?.earliestEviction?.likely;
    expect((run.last()!.value as Value).earliestEviction).toMatchObject({ node: 'node-1', pod: 'default/web-node-1', at: down + 30_000 });
    expect(likely(run.last()!)).toBeUndefined();
    const kept = await run.until((r) => likely(r) !== undefined, 5_000);
    // judged again on its own once the taint outlived the pass: a second (rounding) and a monitor period; kept
    expect(kept.at).toBe(down + 2_000);
    expect((kept.value as Value).earliestEviction).toMatchObject({
      node: 'node-1',
      pod: 'default/web-node-1',
      at: down + 30_000,
      likely: down + 30_000,
    });
  });

  it('says evictions are frozen while no controller-manager holds its leader lease', async () => {
    setup();
    t.api.put(
      '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
      rawLease('kube-system', 'kube-controller-manager', t.clock.now(), 15, 'cp-1_abc'),
    );
    const run = t.start(probe, { margin: '5m' });
    kubelets(['node-2', 'node-3']);
    await run.until((r) => r.status === 'ok');
    await run.until((r) => r.status === 'violated');
    const frozen = await run.until((r) => r.detail.startsWith('no eviction: no kube-controller-manager'));
    expect(frozen.status).toBe('ok');
  });

  it("predicts no eviction while the run's own remediation holds, and says what would follow its undoing", async () => {
    setup();
    const lastRenewal = t.clock.now();
    const run = t.start(probe, { margin: '20s' });
    kubelets(['node-2', 'node-3']);
    await run.until((r) => r.detail.startsWith('first eviction'));
    t.applied.set('f1', { action: 'disable-taint-eviction', node: 'cp-1', stops: 'taint-eviction' });
    const frozen = await run.until((r) => r.detail.startsWith('no eviction: taint eviction disabled by this run'));
    expect(frozen.status).toBe('ok');
    // undone now, a new controller-manager gives node-1 its grace from its start (8 s, tainted a pass later on this
    // server) and its taint manager counts the 30 s toleration from then
    expect(frozen.detail).toBe(
      `no eviction: taint eviction disabled by this run (disable-taint-eviction on cp-1); if restored now, first eviction in 39s: default/web-node-1 on node-1; failing: node-1`,
    );
    expect(frozen.value).toMatchObject({
      frozen: 'taint eviction disabled by this run (disable-taint-eviction on cp-1)',
      earliestEviction: null,
      ifRestoredNow: { pod: 'default/web-node-1', inMs: 39_000 },
    });
    // the forecast stays quiet through what would otherwise be the eviction
    await t.advance(lastRenewal + 45_000 - t.clock.now());
    expect(run.readings.filter((r) => r.at > frozen.at && r.status === 'violated')).toEqual([]);
    t.applied.set('f1', undefined);
    const back = await run.until((r) => r.detail.startsWith('first eviction'));
    expect(back.value).toMatchObject({ frozen: null, ifRestoredNow: null });
  });

  describe('device taints (1.36+)', () => {
    const RESOURCE = '/apis/resource.k8s.io/v1';
    /** A 1.37 server; web-node-1's claim holds fake.example.com/pool-1/gpu-0, tolerating a NoExecute taint for `seconds`. */
    function draSetup(seconds?: number) {
      setup();
      t.kube.rawHandler = (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.37.2"}' } : { status: 404, body: '' });
      kubelets(['node-1', 'node-2', 'node-3']);
      t.api.put(`${RESOURCE}/resourceslices`, {
        metadata: { name: 'node-1-fake' },
        spec: { driver: 'fake.example.com', pool: { name: 'pool-1' }, devices: [{ name: 'gpu-0' }, { name: 'gpu-1' }] },
      });
      t.api.put(`${RESOURCE}/resourceclaims`, {
        metadata: { namespace: 'default', name: 'gpu' },
        status: {
          allocation: {
            devices: {
              results: [
                {
                  request: 'gpu',
                  driver: 'fake.example.com',
                  pool: 'pool-1',
                  device: 'gpu-0',
                  tolerations: [{ key: 'example.com/broken', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: seconds }],
                },
              ],
            },
          },
          reservedFor: [{ resource: 'pods', name: 'web-node-1', uid: 'uid-default-web-node-1' }],
        },
      });
    }
    const taintRule = (device: string, at: number) =>
      t.api.put(`${RESOURCE}/devicetaintrules`, {
        metadata: { name: 'broken-gpu' },
        spec: {
          deviceSelector: { driver: 'fake.example.com', pool: 'pool-1', device },
          taint: { key: 'example.com/broken', effect: 'NoExecute', timeAdded: iso(at) },
        },
      });

    it("predicts the pod of a claim whose device gets a NoExecute DeviceTaintRule at the taint's time + its toleration, and names it", async () => {
      draSetup(30);
      const run = t.start(probe, { margin: '10s' });
      await run.until((r) => r.status === 'ok');
      // a taint on another device of the pool changes nothing
      taintRule('gpu-1', t.clock.now());
      await t.advance(1_000);
      expect(run.last()!.detail).toBe('no eviction predicted: 3 nodes heartbeating');
      const taintedAt = t.clock.now();
      taintRule('gpu-0', taintedAt);
      const seen = await run.until((r) => r.detail.startsWith('first eviction'));
      // judged in batches of a quarter second: 30 s less the time the taint took to wake it
      expect(seen.detail).toMatch(
        /^first eviction in (29\.\d|30)s: default\/web-node-1 on node-1, device taint broken-gpu on fake\.example\.com\/pool-1\/gpu-0 \(1 pod at risk/,
      );
      expect(seen.value).toMatchObject({ earliestEviction: { pod: 'default/web-node-1', at: taintedAt + 30_000 } });
      // violated once within margin, with no further event
      const violated = await run.until((r) => r.status === 'violated', 60_000);
      expect(violated.at).toBe(taintedAt + 20_000);
    });

    it('predicts a taint in the ResourceSlice itself, at once without a toleration; disable-taint-eviction does not stop it', async () => {
      draSetup(undefined);
      // the claim's toleration has no seconds: it tolerates example.com/broken forever; another key is not tolerated
      t.api.update(`${RESOURCE}/resourceslices`, 'node-1-fake', (o) => {
        (o.spec as { devices: Record<string, unknown>[] }).devices[0]!.taints = [
          { key: 'example.com/broken', effect: 'NoExecute', timeAdded: iso(t.clock.now()) },
        ];
      });
      t.applied.set('f1', { action: 'disable-taint-eviction', node: 'cp-1', stops: 'taint-eviction' });
      const run = t.start(probe, { margin: '10s' });
      await run.until((r) => r.status === 'ok');
      await t.advance(1_000);
      expect(run.last()!.detail).toMatch(/^no eviction: taint eviction disabled by this run/);
      t.api.update(`${RESOURCE}/resourceslices`, 'node-1-fake', (o) => {
        (o.spec as { devices: Record<string, unknown>[] }).devices[0]!.taints = [
          { key: 'example.com/overheated', effect: 'NoExecute', timeAdded: iso(t.clock.now()) },
        ];
      });
      const v = await run.until((r) => r.status === 'violated');
      expect(v.detail).toBe(
        'first eviction due now: default/web-node-1 on node-1, device taint example.com/overheated of ResourceSlice node-1-fake on fake.example.com/pool-1/gpu-0 (1 pod at risk on 1 node)',
      );
    });

    it('is frozen while the controller-manager is stopped, and says the device taint eviction would follow its return', async () => {
      draSetup(0);
      t.applied.set('f1', { action: 'stop-controller-manager', node: 'cp-1', stops: 'controller-manager' });
      const run = t.start(probe, { margin: '10s' });
      await run.until((r) => r.status === 'ok');
      const taintedAt = t.clock.now();
      taintRule('gpu-0', taintedAt);
      const frozen = await run.until((r) => (r.value as { ifRestoredNow: unknown } | null)?.ifRestoredNow != null);
      expect(frozen.status).toBe('ok');
      expect(frozen.value).toMatchObject({ earliestEviction: null, ifRestoredNow: { pod: 'default/web-node-1', at: taintedAt } });
      expect(frozen.detail).toMatch(
        /^no eviction: kube-controller-manager stopped by this run .*; if restored now, first eviction due now: default\/web-node-1/,
      );
    });

    it('watches nothing of resource.k8s.io on a 1.34 server, nor with deviceTaints: false', async () => {
      draSetup(0);
      t.kube.rawHandler = (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.34.4"}' } : { status: 404, body: '' });
      taintRule('gpu-0', t.clock.now());
      const run = t.start(probe, { margin: '10s' });
      await run.until((r) => r.status === 'ok');
      await t.advance(2_000);
      expect(run.last()!.detail).toBe('no eviction predicted: 3 nodes heartbeating');
      await run.stop();
      t.kube.rawHandler = (path) => (path === '/version' ? { status: 200, body: '{"gitVersion":"v1.37.2"}' } : { status: 404, body: '' });
      const off = t.start(probe, { margin: '10s', deviceTaints: false });
      await off.until((r) => r.status === 'ok');
      await t.advance(2_000);
      expect(off.last()!.detail).toBe('no eviction predicted: 3 nodes heartbeating');
    });
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
