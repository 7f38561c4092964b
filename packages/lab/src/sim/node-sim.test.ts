import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryLogger } from 'kube-runbook/internal/core/logger.js';
import { FakeClock, flush } from 'kube-runbook/internal/testing/fake-clock.js';
import { readRuntimeDir, RuntimeStore } from './runtime.js';
import type { KubeletCalls } from './api.js';
import { NodeSim } from './node-sim.js';
import type { NodeLite, PodLite, SimNodeConfig } from './types.js';

type Obj = {
  metadata?: { resourceVersion?: string; uid?: string; name?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

/** An apiserver that can be cut off: calls fail while `up` is false. */
class FakeApiserver implements KubeletCalls {
  up = true;
  rv = 1;
  lease: Obj | undefined;
  renewTimes: string[] = [];
  node: (NodeLite & Obj) | undefined;
  statusPosts = 0;
  podPatches: { name: string; body: { status: { phase: string; podIP: string } } }[] = [];
  finalized: string[] = [];

  private check() {
    if (!this.up) throw new Error('connect EHOSTUNREACH 10.213.0.2:6443');
  }
  async readLease() {
    this.check();
    return this.lease?.metadata;
  }
  async createLease(body: object) {
    this.check();
    this.lease = { ...(body as Obj), metadata: { ...(body as Obj).metadata, resourceVersion: String(++this.rv) } };
    this.renewTimes.push(String((body as { spec: { renewTime: string } }).spec.renewTime));
    return this.lease;
  }
  async replaceLease(_name: string, body: object) {
    this.check();
    if ((body as Obj).metadata?.resourceVersion !== this.lease?.metadata?.resourceVersion)
      throw Object.assign(new Error('Conflict'), { statusCode: 409 });
    this.lease = { ...(body as Obj), metadata: { ...(body as Obj).metadata, resourceVersion: String(++this.rv) } };
    this.renewTimes.push(String((body as { spec: { renewTime: string } }).spec.renewTime));
    return this.lease;
  }
  async readNode() {
    this.check();
    return this.node as (NodeLite & { metadata: { uid?: string } }) | undefined;
  }
  async createNode(body: object) {
    this.check();
    this.node = { ...(body as NodeLite), metadata: { ...(body as NodeLite).metadata, uid: 'node-uid-1' } };
    return this.node;
  }
  async patchNodeStatus(_name: string, body: object) {
    this.check();
    this.statusPosts++;
    this.node = { ...this.node!, status: (body as { status: NodeLite['status'] }).status };
  }
  async patchPodStatus(_ns: string, name: string, body: object) {
    this.check();
    this.podPatches.push({ name, body: body as { status: { phase: string; podIP: string } } });
  }
  async finalizePod(_ns: string, name: string) {
    this.check();
    this.finalized.push(name);
  }
  /** What the node lifecycle controller does to a silent node. */
  markUnknown() {
    const conds = (this.node?.status?.conditions ?? []).map((c) =>
      c.type === 'Ready' ? { ...c, status: 'Unknown', reason: 'NodeStatusUnknown' } : c,
    );
    this.node = { ...this.node!, status: { conditions: conds } };
  }
}

const cfg: SimNodeConfig = {
  name: 'node-1',
  zone: 'zone-a',
  region: 'lab',
  ip: '10.213.0.3',
  podCidr: '100.64.1.0/24',
  leaseDurationMs: 8000,
  statusReportFrequencyMs: 60_000,
  statusCheckMs: 2000,
  kubeletVersion: 'v1.20.2',
};

const pod = (name: string, uid: string, extra: Partial<PodLite['metadata']> = {}): PodLite => ({
  metadata: { name, namespace: 'demo', uid, ...extra },
  spec: { nodeName: 'node-1', containers: [{ name: 'web', image: 'pause' }] },
  status: { phase: 'Pending' },
});

describe('kubelet simulator', () => {
  let dir: string;
  let clock: FakeClock;
  let api: FakeApiserver;
  let runtime: RuntimeStore;
  let stop: AbortController;
  let reconnects: number;
  let drops: number[];
  let sim: NodeSim;
  let running: Promise<void>;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kr-sim-'));
    clock = new FakeClock();
    api = new FakeApiserver();
    runtime = new RuntimeStore(join(dir, 'runtime'), 'node-1');
    await runtime.load();
    stop = new AbortController();
    reconnects = 0;
    drops = [];
    sim = new NodeSim(cfg, {
      api,
      clock,
      log: memoryLogger(),
      runtime,
      random: () => 0.5,
      onReconnect: () => reconnects++,
      onRepeatedFailure: () => drops.push(clock.now()),
    });
    running = sim.run(stop.signal);
    await flush();
  });

  afterEach(async () => {
    stop.abort();
    await clock.advance(10);
    await running;
    await rm(dir, { recursive: true, force: true });
  });

  it('registers its Node like a kubelet: zone labels, capacity, addresses, Ready', () => {
    expect(api.node?.metadata.labels).toMatchObject({ 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/hostname': 'node-1' });
    const status = api.node?.status as unknown as {
      capacity: Record<string, string>;
      addresses: { type: string; address: string }[];
      conditions: { type: string; status: string }[];
    };
    expect(status.capacity).toMatchObject({ pods: '110' });
    expect(status.addresses).toContainEqual({ type: 'InternalIP', address: '10.213.0.3' });
    expect(status.conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'MemoryPressure=False',
      'DiskPressure=False',
      'PIDPressure=False',
      'Ready=True',
    ]);
  });

  it('renews its Lease every lease duration / 4 with jitter, owned by its Node', async () => {
    await clock.advance(20_000);
    const times = api.renewTimes.map((t) => Date.parse(t));
    expect(times.length).toBeGreaterThanOrEqual(9);
    expect(times.length).toBeLessThanOrEqual(11);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    for (const g of gaps) expect(g).toBe(2040);
    expect(api.lease?.metadata).toMatchObject({ name: 'node-1' });
    expect(JSON.stringify(api.lease)).toContain('node-uid-1');
    expect(api.renewTimes[0]).toMatch(/\.\d{6}Z$/);
  });

  it('keeps its containers while cut off, and kills those of pods deleted meanwhile when it is back', async () => {
    await sim.onPods([pod('a', 'uid-a'), pod('b', 'uid-b'), pod('c', 'uid-c')]);
    expect(
      runtime
        .list()
        .map((c) => c.pod)
        .sort(),
    ).toEqual(['a', 'b', 'c']);
    expect(api.podPatches.map((p) => p.body.status.phase)).toEqual(['Running', 'Running', 'Running']);
    expect(new Set(api.podPatches.map((p) => p.body.status.podIP)).size).toBe(3);

    api.up = false;
    const renewalsBefore = api.renewTimes.length;
    await clock.advance(30_000);
    expect(api.renewTimes.length).toBe(renewalsBefore);
    expect(runtime.list()).toHaveLength(3);
    api.markUnknown();

    api.up = true;
    await clock.advance(2_100);
    expect(api.renewTimes.length).toBeGreaterThan(renewalsBefore);
    expect(reconnects).toBe(1);
    await flush();
    const ready = (api.node?.status?.conditions ?? []).find((c) => c.type === 'Ready');
    expect(ready?.status).toBe('True');

    // the relist after reconnecting: a was marked for deletion by the taint manager, b was deleted, c is fine
    await sim.onPods([pod('a', 'uid-a', { deletionTimestamp: '2026-01-01T00:01:00Z' }), pod('c', 'uid-c')]);
    expect(runtime.list().map((c) => c.pod)).toEqual(['c']);
    expect(api.finalized).toEqual(['a']);
    const onDisk = await readRuntimeDir(join(dir, 'runtime'), 'node-1');
    expect(onDisk.containers.map((c) => c.pod)).toEqual(['c']);
    expect(onDisk.kills.map((k) => `${k.pod}: ${k.reason}`).sort()).toEqual([
      'a: pod marked for deletion (deletionTimestamp 2026-01-01T00:01:00Z)',
      'b: pod no longer exists on the apiserver (deleted while this node was out of contact)',
    ]);
    expect(onDisk.kills.every((k) => k.atMs === Date.parse(k.at) && k.node === 'node-1')).toBe(true);
  });

  it('kills and finalizes on watch events, and does nothing twice', async () => {
    await sim.onPodEvent('ADDED', pod('a', 'uid-a'));
    await sim.onPodEvent('MODIFIED', { ...pod('a', 'uid-a'), status: api.podPatches[0]!.body.status as PodLite['status'] & object });
    expect(api.podPatches).toHaveLength(1);
    await sim.onPodEvent('MODIFIED', pod('a', 'uid-a', { deletionTimestamp: '2026-01-01T00:00:30Z' }));
    await sim.onPodEvent('DELETED', pod('a', 'uid-a', { deletionTimestamp: '2026-01-01T00:00:30Z' }));
    const state = await readRuntimeDir(join(dir, 'runtime'), 'node-1');
    expect(state.containers).toEqual([]);
    expect(state.kills).toHaveLength(1);
    expect(api.finalized).toEqual(['a']);
  });

  it('drops its connections on each failed renewal after the first, retrying with a bounded back-off, until one succeeds', async () => {
    await clock.advance(3_000);
    const renewals = api.renewTimes.length;
    const replace = api.replaceLease.bind(api);
    let attempts = 0;
    api.replaceLease = (name: string, body: object) => (attempts++, replace(name, body));
    api.up = false;
    await clock.advance(20_000);
    // the first failure keeps the connections; every one after it drops them
    expect(attempts).toBeGreaterThanOrEqual(9);
    expect(drops).toHaveLength(attempts - 1);
    // retries 0.2, 0.4, 0.8, 1.6 s after failures, then every 2 s (the renew interval), never longer
    const gaps = drops.slice(1).map((t, i) => t - drops[i]!);
    expect(Math.max(...gaps)).toBe(2_000);
    expect(drops.length).toBeLessThanOrEqual(12);
    api.up = true;
    await clock.advance(2_100);
    expect(api.renewTimes.length).toBeGreaterThan(renewals);
    const after = drops.length;
    await clock.advance(10_000);
    expect(drops.length).toBe(after);
  });

  it('retries a pod whose status could not be reported', async () => {
    api.up = false;
    await sim.onPodEvent('ADDED', pod('a', 'uid-a'));
    expect(runtime.list()).toHaveLength(1);
    expect(api.podPatches).toHaveLength(0);
    api.up = true;
    await clock.advance(2_000);
    await flush();
    expect(api.podPatches.map((p) => p.name)).toEqual(['a']);
  });

  it('posts NodeStatus when the controller changed it, else once per report frequency', async () => {
    const posts = api.statusPosts;
    await clock.advance(10_000);
    expect(api.statusPosts).toBe(posts);
    api.markUnknown();
    await clock.advance(2_000);
    expect(api.statusPosts).toBe(posts + 1);
    await clock.advance(60_000);
    expect(api.statusPosts).toBe(posts + 2);
  });
});
