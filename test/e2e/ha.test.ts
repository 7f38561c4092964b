/**
 * The HA game days on `lab up --control-planes 3`: a 3-member etcd, an apiserver, controller-manager and scheduler
 * per member, HAProxy as the VIP. etcd-member-loss ends with exit 0, no node NotReady and no pod deleted
 * (control-plane-member-loss runs on kubeadm's HA control plane: test/e2e/kubeadm-ha.test.ts); load-balancer-outage
 * (the VIP dies) ends with nothing evicted and nothing killed. While each runs, this file measures what a person would
 * look at and prints it: when the etcd, controller-manager and scheduler leaders changed, the longest gap without an
 * answer through the VIP, and the longest gap between two renewals of any node Lease. examples/control-plane-overload-ha.yaml (incident 3 with one member left behind the VIP,
 * loaded and its apiserver starved of CPU) aborts before a node goes NotReady or a leader is lost.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { runAndMeasure, type Outcome } from '../../packages/lab/src/cli/demo.js';
import { realClock } from '../../src/core/clock.js';
import { labNames } from '../../packages/lab/src/index.js';
import type { KubeAccess } from '../../src/kube/types.js';
import { labContext } from './helpers/lab-context.js';
import { REPO, cli, leftovers, startLab, stopLab, until, whyRun, type LabInfo, labCli } from './helpers/lab.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { countLoadApart, cpuCgroups, flow, loadIdentitiesLeft, loadStopped } from './helpers/overload.js';

const INSTANCE = 'ha1';
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);

/** Samples, every 250 ms while a runbook runs: leaders (etcd, Leases), the VIP's /readyz, node Lease renewals. */
function measure(l: LabInfo) {
  const members = l.members!;
  const kc = new KubeConfig();
  kc.loadFromFile(members[2]!.kubeconfig); // cp-3 stays up in every runbook here
  const coord = kc.makeApiClient(CoordinationV1Api);
  const agent = new Agent({ ca: readFileSync(join(l.stateDir, 'pki', 'ca.crt')), keepAlive: false });
  const leaders: Record<string, { value: string; at: number }[]> = { etcd: [], 'kube-controller-manager': [], 'kube-scheduler': [] };
  const note = (what: string, value: string | undefined) => {
    const list = leaders[what]!;
    if (value && list.at(-1)?.value !== value) list.push({ value, at: realClock.now() });
  };
  let lastOk = realClock.now();
  let longestVipGap = 0;
  const renewals = new Map<string, number>();
  let longestRenewGap = 0;
  let stop = false;
  const vip = () =>
    new Promise<boolean>((resolve) => {
      const req = request(`${l.apiserverUrl}/readyz`, { agent, timeout: 1000 }, (res) => (res.resume(), resolve(res.statusCode === 200)));
      req.on('error', () => resolve(false));
      req.on('timeout', () => (req.destroy(), resolve(false)));
      req.end();
    });
  const loop = (async () => {
    while (!stop) {
      const now = realClock.now();
      if (await vip()) {
        longestVipGap = Math.max(longestVipGap, realClock.now() - lastOk);
        lastOk = realClock.now();
      }
      for (const m of members) {
        const r = await fetch(`${m.etcdUrl}/v3/maintenance/status`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(500) }).catch(
          () => undefined,
        );
        const body = r?.ok ? ((await r.json()) as { header?: { member_id?: string }; leader?: string }) : undefined;
        if (body?.leader && body.leader === body.header?.member_id) note('etcd', m.name);
      }
      for (const name of ['kube-controller-manager', 'kube-scheduler']) {
        const lease = await coord.readNamespacedLease({ name, namespace: 'kube-system' }).catch(() => undefined);
        note(name, lease?.spec?.holderIdentity);
      }
      const nodeLeases = await coord.listNamespacedLease({ namespace: 'kube-node-lease' }).catch(() => undefined);
      for (const lease of nodeLeases?.items ?? []) {
        const renew = new Date(lease.spec?.renewTime as unknown as string).getTime();
        const prev = renewals.get(lease.metadata!.name!);
        if (prev !== undefined && renew > prev) longestRenewGap = Math.max(longestRenewGap, renew - prev);
        renewals.set(lease.metadata!.name!, renew);
      }
      await realClock.sleep(Math.max(0, 250 - (realClock.now() - now)));
    }
  })();
  return async () => {
    stop = true;
    await loop;
    const t0 = (x: { value: string; at: number }[]) =>
      x.map((e) => `${e.value.slice(0, 12)}@${new Date(e.at).toISOString().slice(11, 23)}`).join(' → ');
    const figures = {
      etcdLeaders: t0(leaders.etcd!),
      controllerManagerLeaders: t0(leaders['kube-controller-manager']!),
      schedulerLeaders: t0(leaders['kube-scheduler']!),
      longestVipGapMs: longestVipGap,
      longestLeaseRenewalGapMs: longestRenewGap,
    };
    return figures;
  };
}

/**
 * Moves the controller-manager's and scheduler's leadership to `name` a while before a run: the other members'
 * controllers stop until `name`'s renew both Leases, then start again as candidates.
 */
async function makeLeadersOn(l: LabInfo, name: string, kube: KubeAccess): Promise<void> {
  const others = l.members!.filter((m) => m.name !== name);
  const script = (node: string, service: string, what: 'start' | 'stop') => execFileSync(join(l.stateDir, 'nodes', node, service, what));
  const renewals = async () =>
    Promise.all(
      CONTROLLERS.map(async (c) => {
        const lease = await kube.json!<{ spec: { holderIdentity?: string; renewTime?: string } }>(
          `/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/${c}`,
          { timeoutMs: 5000 },
        );
        return `${lease.spec.holderIdentity ?? ''}@${lease.spec.renewTime ?? ''}`;
      }),
    );
  for (const m of others) for (const c of CONTROLLERS) script(m.name, c, 'stop');
  try {
    // the only candidates left are `name`'s: a holder that keeps renewing is theirs
    await until(
      `the leaders on ${name}`,
      async () => {
        const a = await renewals();
        await realClock.sleep(2500);
        const b = await renewals();
        return a.every((x, i) => !x.startsWith('@') && x.split('@')[0] === b[i]!.split('@')[0] && x !== b[i]);
      },
      60_000,
      0,
    );
  } finally {
    for (const m of others) for (const c of CONTROLLERS) script(m.name, c, 'start');
  }
}

const CONTROLLERS = ['kube-controller-manager', 'kube-scheduler'];

async function game(name: string, extra: string[] = []): Promise<Outcome> {
  const done = measure(lab);
  const o = await runAndMeasure(lab, runbook(name), true, extra);
  const figures = await done();
  console.log(`${name}: exit ${o.exitCode}; ${JSON.stringify(figures)}`);
  return o;
}

const deleted = (o: Outcome) => {
  const obs = o.report.observations['pods deleted'] as { value?: { deletions?: unknown[] } } | undefined;
  return obs?.value?.deletions ?? [];
};
const notReadyTransitions = (o: Outcome) =>
  o.report.guardTransitions.filter((t) => /^every (other )?node stays Ready$/.test(t.guard) && t.status === 'violated');

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3, controlPlanes: 3 });
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
  expect(await leftovers(INSTANCE)).toEqual([]);
});

describe('the HA lab', () => {
  it('has three members behind the VIP, and lab status shows etcd, the leaders and the backends', async () => {
    expect(lab.members?.map((m) => m.name)).toEqual(['cp-1', 'cp-2', 'cp-3']);
    expect(lab.nodes.find((n) => n.name === 'lb')?.roles).toEqual(['load-balancer']);
    // `lab up` returned once HAProxy saw every apiserver UP; a health check on a busy machine can still miss once
    // (`UP 1/3`, going down), so status is read until it shows all three passing, at most 30 s
    let out = '';
    await until(
      'lab status to show three backends UP L7OK/200',
      async () => {
        out = (await labCli(['status', '--instance', INSTANCE])).stdout;
        return (out.match(/^ {2}cp-\d +UP +L7OK\/200/gm) ?? []).length === 3;
      },
      30_000,
      1000,
    ).catch(() => undefined);
    expect(out).toMatch(/ETCD MEMBERS[\s\S]*leader/);
    expect(out.match(/^ {2}cp-\d +UP +L7OK\/200/gm), out).toHaveLength(3);
  });
});

describe('etcd-member-loss', () => {
  it('exit 0: writes keep working, every node stays Ready, no pod deleted, the member rejoins', async () => {
    const o = await game('etcd-member-loss.yaml');
    expect(o.exitCode, whyRun(o)).toBe(0);
    expect(notReadyTransitions(o)).toEqual([]);
    expect(deleted(o)).toEqual([]);
    expectObjectivesMet(o.report, 'etcd-member-loss', ['etcd has three members and a leader again', 'every lease fresh']);
    await until(
      'three etcd members healthy',
      async () =>
        (await labCli(['status', '--instance', INSTANCE])).stdout.match(/^ {2}cp-\d +http\S+ +(leader|follower)$/gm)?.length === 3,
      60_000,
      1000,
    );
  });
});

describe('load-balancer-outage', () => {
  it('the VIP dies: evictions are frozen before the first one; nothing evicted, nothing killed', async () => {
    const o = await game('load-balancer-outage.yaml', ['--kubeconfig', lab.members![1]!.kubeconfig]);
    expect(o.evicted).toEqual([]);
    expect(o.killed).toEqual([]);
    expect(o.report.remaining).toEqual([]);
    expectObjectivesMet(o.report, 'load-balancer-outage', [
      'the VIP answers again',
      'every lease fresh again',
      'every node Ready again',
      'every Deployment available again',
    ]);
  });
});

describe('examples/control-plane-overload-ha.yaml', () => {
  type Report = {
    status: string;
    steps: { name: string; readings?: { value?: { holder?: string } }[] }[];
    guardFirings: { at: string; guard: string; response: string; detail: string }[];
    guardTransitions: { guard: string; status: string }[];
    faults: { action: string; node?: string; status: string; appliedAt?: string }[];
    remaining: unknown[];
  };

  it('cp-1 alone behind the VIP, loaded, its apiserver starved: aborts before a node is NotReady or a leader lost; all put back', async () => {
    const t0 = realClock.now();
    const lc = await labContext(lab);
    try {
      const kube = lc.ctx.kube;
      await countLoadApart(kube);
      // on this small machine a leader that moves to cp-1 during the run starts its controllers as cp-1 takes all the
      // traffic, renews late and the guard aborts before the load: as the example's header says, they move first
      await makeLeadersOn(lab, 'cp-1', kube);
      await realClock.sleep(10_000);
      const { quotaOf, throttledOf } = await cpuCgroups();
      // the lab's members run each component in a cpu cgroup of its own, as kubeadm's static pods do
      const cg = join(labNames(INSTANCE).nodeCgroup('cp-1'), 'kube-apiserver');
      const quotaBefore = quotaOf(cg);
      const throttledBefore = throttledOf(cg);
      const before = await flow(kube);
      const readyBefore = await lc.ctx.kube.json!<{
        items: { metadata: { name: string }; status: { conditions: { type: string; lastTransitionTime: string }[] } }[];
      }>('/api/v1/nodes', { timeoutMs: 10_000 });
      const seen = new Set<string>();
      let stop = false;
      const watching = (async () => {
        while (!stop) {
          seen.add(quotaOf(cg));
          await realClock.sleep(200);
        }
      })();
      const r = await cli(
        ['run', join(REPO, 'examples', 'control-plane-overload-ha.yaml'), '-i', lab.inventoryFile, '--yes', '--output', 'json'],
        {
          timeoutMs: 300_000,
        },
      );
      stop = true;
      await watching;
      expect(r.stdout.trimStart().startsWith('{'), `the run's report on stdout (exit ${r.code}): ${r.stderr.slice(-3000)}`).toBe(true);
      const report = JSON.parse(r.stdout) as Report;
      expect(report.status, r.stderr.slice(-3000)).toBe('aborted');
      expect(r.code).toBe(1);
      // the guards abort once cp-1 answers too late under the load (the controller-manager's renewals, the apiserver's
      // latency), not before it: the quota and the load were both applied before the abort, and both reverted
      const faults = report.faults.map((f) => `${f.action} ${f.node ?? 'cluster'} ${f.status}`);
      expect(faults).toContain('starve-cpu cp-1 reverted');
      expect(faults, 'the load applied before the abort').toContain('load-apiserver cluster reverted');
      expect(faults.filter((f) => !f.endsWith(' reverted'))).toEqual([]);
      expect(report.remaining).toEqual([]);
      // cp-1's apiserver had half a CPU, was throttled, and has its quota back
      expect([...seen]).toContain('50000');
      expect(quotaOf(cg)).toBe(quotaBefore);
      expect(throttledOf(cg), "periods cp-1's apiserver was throttled in").toBeGreaterThan(throttledBefore);
      // a guard aborted after the quota; no node went NotReady; the leader cp-1 took before the load kept its Lease
      const starve = report.faults.find((f) => f.action === 'starve-cpu')!;
      const load = report.faults.find((f) => f.action === 'load-apiserver')!;
      const firing = report.guardFirings.find((g) => g.response === 'abort');
      expect(firing, JSON.stringify(report.guardFirings)).toBeDefined();
      expect(Date.parse(load.appliedAt!), 'the load applied after the quota').toBeGreaterThanOrEqual(Date.parse(starve.appliedAt!));
      expect(Date.parse(firing!.at), 'the abort after the load').toBeGreaterThanOrEqual(Date.parse(load.appliedAt!));
      expect(report.guardTransitions.filter((t) => t.guard === 'no node NotReady' && t.status === 'violated')).toEqual([]);
      const leader = report.steps.find((st) => st.name === "cp-1's controller-manager leads")?.readings?.at(-1)?.value?.holder;
      expect(leader).toBeTruthy();
      const lease = await kube.json!<{ spec: { holderIdentity: string } }>(
        '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager',
        {
          timeoutMs: 10_000,
        },
      );
      expect(lease.spec.holderIdentity).toBe(leader);
      const readyAfter = await kube.json!<typeof readyBefore>('/api/v1/nodes', { timeoutMs: 10_000 });
      const since = (l: typeof readyBefore) =>
        Object.fromEntries(l.items.map((n) => [n.metadata.name, n.status.conditions.find((c) => c.type === 'Ready')?.lastTransitionTime]));
      expect(since(readyAfter)).toEqual(since(readyBefore));
      // the load went through its FlowSchema, and stopped with the revert
      const during = await flow(kube);
      expect(during.dispatched - before.dispatched, 'requests its FlowSchema dispatched').toBeGreaterThan(50);
      await loadStopped(kube, before.executing, 10_000);
      expect(await loadIdentitiesLeft(kube), "the load's identity, after the run").toEqual([]);
      console.log(
        `control-plane-overload-ha: ${firing!.guard}: ${firing!.detail}, ${((Date.parse(firing!.at) - Date.parse(starve.appliedAt!)) / 1000).toFixed(1)} s after the quota, ` +
          `${((Date.parse(firing!.at) - Date.parse(load.appliedAt!)) / 1000).toFixed(1)} s after the load; ` +
          `faults ${faults.join(', ')}; ${during.dispatched - before.dispatched} requests dispatched; ${((realClock.now() - t0) / 1000).toFixed(1)} s`,
      );
    } finally {
      await lc.close();
    }
  });
});
