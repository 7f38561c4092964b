import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultRegistry } from '../../src/engine/registry.js';
import type { RevertState } from '../../src/contract/action.js';
import { realClock } from '../../src/core/clock.js';
import type { ActionCtx } from '../../src/contract/context.js';
import type { KubeAccess } from '../../src/kube/types.js';
import { startLab, stopLab, until, type LabInfo } from './helpers/lab.js';
import { countLoadApart, flow as flowOf, loadIdentitiesLeft } from './helpers/overload.js';
import { labContext } from './helpers/lab-context.js';
import { RunTasks } from '../../src/engine/tasks.js';
import { series } from '../../src/kube/prometheus.js';

/**
 * Every action against the lab's real control plane: the effect is visible, the revert removes it completely,
 * and the node-side revert script alone (what the dead-man runs) undoes it too.
 */
const INSTANCE = 'act';
let lab: LabInfo;
let ctx: ActionCtx;
let kube: KubeAccess;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 2, workload: false });
  ({ ctx } = await labContext(lab, { runId: `e2e-actions-${process.pid}` }));
  kube = ctx.kube;
});

afterAll(async () => {
  (kube as { close?: () => void } | undefined)?.close?.();
  await stopLab(INSTANCE);
});

const sleep = (ms: number) => realClock.sleep(ms);

/** preflight, prepare, apply on one node; returns the state and the action. */
async function applyOn(id: string, node: string, params: Record<string, unknown> = {}) {
  const action = await defaultRegistry.action(id);
  const p = action.meta.params.parse(params);
  const actx = { ...ctx, node: ctx.nodes.get(node) };
  await action.preflight?.(actx, p);
  const state = await action.prepare(actx, p);
  expect(JSON.parse(JSON.stringify(state))).toEqual(state);
  const applied = await action.apply(actx, state);
  return { action, actx, state: applied as RevertState };
}

const sh = async (node: string, script: string) => ctx.nodes.exec(node, script, { timeoutMs: 30_000 });
const labStatus = async (node: string, service: string) => (await sh(node, `${lab.stateDir}/nodes/${node}/${service}/status`)).code;
const readyz = async () => (await kube.raw('/readyz', { timeoutMs: 3000 }).catch(() => ({ status: 0, body: '' }))).status;

async function leaseRenewTime(node: string): Promise<string> {
  const r = await kube.raw(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${node}`, { timeoutMs: 5000 });
  return (JSON.parse(r.body) as { spec: { renewTime: string } }).spec.renewTime;
}

describe('stop-* actions on the lab', () => {
  it('stop-controller-manager and stop-scheduler: the process is gone, and back healthy after the revert', async () => {
    for (const [id, service] of [
      ['stop-controller-manager', 'kube-controller-manager'],
      ['stop-scheduler', 'kube-scheduler'],
    ] as const) {
      const { action, actx, state } = await applyOn(id, 'cp-1');
      expect(await labStatus('cp-1', service), `${service} stopped`).toBe(3);
      await action.revert(actx, state);
      expect((await sh('cp-1', `${lab.stateDir}/nodes/cp-1/${service}/health`)).code, `${service} healthy`).toBe(0);
    }
  });

  it("stop-kubelet: the simulator stops, node-1's lease goes stale while node-2's renews; the revert resumes renewals", async () => {
    const { action, actx, state } = await applyOn('stop-kubelet', 'node-1');
    expect(await labStatus('node-1', 'kubelet')).toBe(3);
    const before = await leaseRenewTime('node-1');
    const other = await leaseRenewTime('node-2');
    await sleep(5000);
    expect(await leaseRenewTime('node-1')).toBe(before);
    expect(await leaseRenewTime('node-2')).not.toBe(other);
    await action.revert(actx, state);
    await until('node-1 renews its lease again', async () => (await leaseRenewTime('node-1')) !== before, 30_000);
  });
});

describe('block-kubelet-egress on the lab', () => {
  const chainCounters = async (node: string, chain: string) => {
    const r = await sh(node, `iptables -w -L ${chain} -v -x -n`);
    if (r.code !== 0) return -1;
    return r.stdout
      .split('\n')
      .filter((l) => /\bDROP\b/.test(l))
      .reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0);
  };

  it("node-1's lease renewals stop while the chain's counters rise; the revert removes every rule", async () => {
    const { action, actx, state } = await applyOn('block-kubelet-egress', 'node-1');
    const chain = String(state.chain);
    expect((await sh('node-1', 'iptables -w -S OUTPUT')).stdout).toContain(`-j ${chain}`);
    const renew = await leaseRenewTime('node-1');
    const other = await leaseRenewTime('node-2');
    const c0 = await chainCounters('node-1', chain);
    await sleep(6000);
    const c1 = await chainCounters('node-1', chain);
    expect(await leaseRenewTime('node-1')).toBe(renew);
    expect(await leaseRenewTime('node-2')).not.toBe(other);
    expect(c1).toBeGreaterThan(c0);
    await action.revert(actx, state);
    const rules = (await sh('node-1', 'iptables -w -S')).stdout;
    expect(rules).not.toContain('KR-EGRESS');
    await until('node-1 renews its lease again', async () => (await leaseRenewTime('node-1')) !== renew, 60_000);
    await action.revert(actx, state); // idempotent
  });

  it('the node-side revert alone removes the chain', async () => {
    const { action, state } = await applyOn('block-kubelet-egress', 'node-2');
    expect((await sh('node-2', 'iptables -w -S')).stdout).toContain(String(state.chain));
    const r = await sh('node-2', action.nodeSideRevert(state)!);
    expect(r.code, r.stderr).toBe(0);
    expect((await sh('node-2', 'iptables -w -S')).stdout).not.toContain('KR-EGRESS');
  });
});

describe('throttle-etcd-disk on the lab', () => {
  const metrics = async () => (await fetch(`${lab.etcdUrl}/metrics`)).text();
  function fsyncHistogram(text: string): { le: number; count: number }[] {
    const out: { le: number; count: number }[] = [];
    for (const m of text.matchAll(/^etcd_disk_wal_fsync_duration_seconds_bucket\{le="([^"]+)"\} (\d+)/gm))
      out.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]), count: Number(m[2]) });
    return out;
  }
  /** p99 (bucket upper bound) of the fsyncs between two scrapes. */
  function p99(before: string, after: string): { p99: number; fsyncs: number } {
    const a = fsyncHistogram(before);
    const b = fsyncHistogram(after);
    const delta = b.map((x, i) => ({ le: x.le, count: x.count - (a[i]?.count ?? 0) }));
    const total = delta.at(-1)?.count ?? 0;
    return { p99: delta.find((x) => x.count >= 0.99 * total)?.le ?? Infinity, fsyncs: total };
  }
  async function writeThroughApiserver(n: number, tag: string) {
    for (let i = 0; i < n; i++) {
      const name = `kr-e2e-${tag}-${i}`;
      await kube.json!('/api/v1/namespaces/default/configmaps', {
        method: 'POST',
        body: { metadata: { name }, data: { i: String(i) } },
        timeoutMs: 30_000,
      });
      await kube.json!(`/api/v1/namespaces/default/configmaps/${name}`, { method: 'DELETE', timeoutMs: 30_000 });
    }
  }
  async function measure(tag: string) {
    const before = await metrics();
    await writeThroughApiserver(tag === 'throttled' ? 10 : 40, tag);
    return p99(before, await metrics());
  }

  it("etcd's WAL fsync p99 rises two buckets or more, to the limit's floor; the revert removes the limit", async () => {
    const writeIops = 10;
    const base = await measure('base');
    const { action, actx, state } = await applyOn('throttle-etcd-disk', 'cp-1', { writeIops });
    expect(state.cgroup, 'the lab etcd cgroup').toBe(lab.etcdCgroup.replace(/^\/sys\/fs\/cgroup(\/blkio)?/, ''));
    const throttled = await measure('throttled');
    await action.revert(actx, state);
    const after = await measure('after');
    console.log(
      `etcd WAL fsync p99: ${base.p99 * 1000} ms before (${base.fsyncs} fsyncs), ${throttled.p99 * 1000} ms throttled (${throttled.fsyncs}), ${after.p99 * 1000} ms after the revert`,
    );
    expect(base.fsyncs).toBeGreaterThan(20);
    expect(throttled.fsyncs).toBeGreaterThan(10);
    // etcd's buckets double, and the baseline's tail is this machine's disk, which other lanes' labs write to (128 ms
    // seen): two buckets up, and no faster than the limit lets one write through (an fsync writes at least once)
    expect(throttled.p99).toBeGreaterThanOrEqual(4 * base.p99);
    expect(throttled.p99).toBeGreaterThanOrEqual(1 / writeIops);
    expect(after.p99).toBeLessThan(throttled.p99);
    const files = state.version === 2 ? ['io.max'] : ['blkio.throttle.write_iops_device', 'blkio.throttle.read_iops_device'];
    for (const f of files)
      expect(readFileSync(join(lab.etcdCgroup, f), 'utf8'), `${f} after the revert`).not.toMatch(
        new RegExp(`^${String(state.device)} .*\\d`, 'm'),
      );
  });
});

describe('load-apiserver on the lab', () => {
  /** A FlowSchema that counts apart the requests of kr-load's ServiceAccounts, where runs make their loads' identities. */
  const FS = { name: 'kr-load-e2e', subject: { group: 'system:serviceaccounts:kr-load' } };
  const LEVEL = 'workload-low';

  /** The FlowSchema's dispatched requests, and what executes in its priority level now. */
  const flow = () => flowOf(kube, FS);

  beforeAll(() => countLoadApart(kube, FS));

  it("100 qps as the identity it makes, granted only the load's rights: dispatched and executed; none, and no identity, after the revert", async () => {
    const tasks = new RunTasks(ctx.log);
    const lctx: ActionCtx = { ...ctx, tasks };
    const action = await defaultRegistry.action('load-apiserver');
    const params = action.meta.params.parse({
      qps: 100,
      concurrency: 20,
      userAgent: 'kubelet-liveness-like',
      requests: [
        { verb: 'list', resource: 'pods', weight: 4 },
        { verb: 'patch', resource: 'configmaps' },
      ],
    });
    const before = await flow();
    const state = await action.prepare(lctx, params);
    const applied = (await action.apply(lctx, state)) as typeof state;
    const id = (applied.identity as { name: string }).name;
    // the identity may do what the load does, and nothing else: not even read the pods' ConfigMaps elsewhere
    const may = async (verb: string, resource: string, namespace?: string) =>
      (
        await kube.json!<{ status: { allowed: boolean } }>('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
          method: 'POST',
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: `system:serviceaccount:kr-load:${id}`,
              groups: ['system:serviceaccounts', 'system:serviceaccounts:kr-load', 'system:authenticated'],
              resourceAttributes: { verb, resource, ...(namespace ? { namespace } : {}) },
            },
          },
          timeoutMs: 5000,
        })
      ).status.allowed;
    expect(await may('list', 'pods')).toBe(true);
    expect(await may('patch', 'configmaps', 'kr-load')).toBe(true);
    expect(await may('get', 'configmaps', 'kube-system')).toBe(false);
    expect(await may('delete', 'pods', 'default')).toBe(false);
    expect(await may('create', 'rolebindings', 'kr-load')).toBe(false);
    const startedAt = realClock.now();
    let busiest = 0;
    while (realClock.now() - startedAt < 4000) {
      busiest = Math.max(busiest, (await flow()).executing);
      await sleep(100);
    }
    const during = await flow();
    const seconds = (realClock.now() - startedAt) / 1000;
    await action.revert(lctx, applied);
    expect(tasks.keys).toEqual([]);
    const after = await flow();
    await sleep(2000);
    const later = await flow();
    console.log(
      `load-apiserver: ${during.dispatched - before.dispatched} dispatched by FlowSchema kr-load-e2e in ${seconds.toFixed(1)} s, ` +
        `${LEVEL} executing at most ${busiest} (before ${before.executing}); ${later.dispatched - after.dispatched} in the 2 s after the revert`,
    );
    expect(during.dispatched - before.dispatched).toBeGreaterThan(0.7 * 100 * seconds);
    expect(during.dispatched - before.dispatched).toBeLessThan(100 * seconds + 20);
    expect(busiest).toBeGreaterThan(before.executing);
    expect(later.dispatched).toBe(after.dispatched);
    expect(later.executing).toBe(0);
    const cm = await kube.raw(`/api/v1/namespaces/kr-load/configmaps/${(applied.own as { configmaps: string }).configmaps}`, {
      timeoutMs: 5000,
    });
    expect(cm.status, 'its ConfigMap is deleted').toBe(404);
    expect(await loadIdentitiesLeft(kube), 'its identity is deleted').toEqual([]);
  });

  it("shed-apiserver-load top 1: the load's FlowSchema is copied into a low priority level that now serves it; the revert deletes both", async () => {
    const tasks = new RunTasks(ctx.log);
    const lctx: ActionCtx = { ...ctx, tasks };
    const load = await defaultRegistry.action('load-apiserver');
    const loadParams = load.meta.params.parse({ qps: 100, requests: [{ verb: 'list', resource: 'pods' }] });
    const loading = await load.apply(lctx, await load.prepare(lctx, loadParams));
    const shed = await defaultRegistry.action('shed-apiserver-load');
    const params = shed.meta.params.parse({ top: 1, window: '3s' });
    let state: RevertState | undefined;
    try {
      await shed.preflight!(lctx, params);
      state = await shed.prepare(lctx, params);
      expect(state.shed).toEqual(['the FlowSchema kr-load-e2e (workload-low)']);
      await shed.apply(lctx, state);
      const level = (state.level as { metadata: { name: string } }).metadata.name;
      const fc = '/apis/flowcontrol.apiserver.k8s.io/v1';
      await until(
        'the new FlowSchema is taken in',
        async () => {
          const fs = await kube.json!<{ status?: { conditions?: { type: string; status: string }[] } }>(`${fc}/flowschemas/${level}-1`, {
            timeoutMs: 5000,
          });
          return fs.status?.conditions?.some((c) => c.type === 'Dangling' && c.status === 'False') ?? false;
        },
        10_000,
      );
      /** Requests dispatched so far by the new FlowSchema into the new level, and by the original. */
      const counts = async () => {
        const text = (await kube.raw('/metrics', { timeoutMs: 5000 })).body;
        const total = (match: (l: Record<string, string>) => boolean) =>
          series(text, 'apiserver_flowcontrol_dispatched_requests_total')
            .filter((x) => match(x.labels))
            .reduce((n, x) => n + x.value, 0);
        return {
          shed: total((l) => l.priority_level === level && l.flow_schema === `${level}-1`),
          original: total((l) => l.flow_schema === 'kr-load-e2e'),
        };
      };
      const before = await counts();
      const startedAt = realClock.now();
      await sleep(3000);
      const after = await counts();
      const seconds = (realClock.now() - startedAt) / 1000;
      console.log(
        `shed-apiserver-load: ${after.shed - before.shed} dispatched in ${level} in ${seconds.toFixed(1)} s, ` +
          `${after.original - before.original} still by kr-load-e2e`,
      );
      expect(after.shed - before.shed).toBeGreaterThan(0.5 * 100 * seconds);
      expect(after.original - before.original).toBeLessThan(5);
      await shed.revert(lctx, state);
      state = undefined;
      for (const path of [`${fc}/flowschemas/${level}-1`, `${fc}/prioritylevelconfigurations/${level}`])
        expect((await kube.raw(path, { timeoutMs: 5000 })).status, `${path} deleted`).toBe(404);
    } finally {
      if (state) await shed.revert(lctx, state).catch(() => {});
      await load.revert(lctx, loading);
    }
  });
});

// Last: without an apiserver the lab's controller-manager and scheduler lose their leader lease and exit, and
// the lab, unlike a kubelet or systemd, does not restart them.
describe('stop-apiserver on the lab', () => {
  it('stop-apiserver: /readyz fails while applied; the revert brings it back; so does the node-side revert alone', async () => {
    expect(await readyz()).toBe(200);
    const { action, actx, state } = await applyOn('stop-apiserver', 'cp-1');
    expect(await labStatus('cp-1', 'kube-apiserver')).toBe(3);
    expect(await readyz()).toBe(0);
    await action.revert(actx, state);
    expect(await readyz()).toBe(200);
    await action.revert(actx, state); // idempotent

    const again = await applyOn('stop-apiserver', 'cp-1');
    expect(await readyz()).toBe(0);
    const r = await sh('cp-1', action.nodeSideRevert(again.state)!);
    expect(r.code, r.stderr).toBe(0);
    expect(await readyz()).toBe(200);
  });
});
