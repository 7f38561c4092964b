/**
 * The incident runbooks against the lab's real control plane, on every Kubernetes version the lab supports (the
 * e2e projects of vitest.config.ts): with their guards no pod is evicted and no container is killed. Without them
 * the controller evicts and the kubelets kill, which proves the guarded runs could fail: run once per eviction path
 * (CASCADES below), not on every release. On 1.37 and 1.34 the cluster is kubeadm's (`lab up --kubeadm --real-nodes
 * 3`: `kubeadm init` on cp-1, its static pods, manifests and flags; three workers joined by `kubeadm join`, each the
 * release's kubelet, containerd 2 and runc), so every fault and remediation runs on kubeadm's own files, and the
 * containers killed are counted by each node's containerd, from container ids and start times before and after the
 * run; on 1.20, which kubeadm's lab does not run, on the lab's own control plane and simulated nodes, from the
 * simulator's kill log.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { runAndMeasure, type Outcome } from '../../packages/lab/src/cli/demo.js';
import { realClock } from '../../src/core/clock.js';
import { parseKubeVersion, traitsOf } from '../../src/kube/versions.js';
import { agentInventory, agentPodsGone, applyAgentManifests } from './helpers/agents.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { evictionsBackAt, leadershipLost, LeaseTimes, controllerSaid, NotReadyTimes } from './helpers/lease-times.js';
import { instanceFor, LAB_VERSION, REAL_NODES, REPO, startLab, stopLab, until, workerNodes, type LabInfo, labCli } from './helpers/lab.js';

const INSTANCE = instanceFor('inc');
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);

/** Every node Ready and every pod Running again (the Deployment replaces evicted pods). */
const settled = () => until('the lab to settle', async () => (await labCli(['status', '--instance', INSTANCE])).code === 0, 180_000, 1000);

/** Where the containers killed were counted: containerd of each real node, else the simulator's kill log. */
function expectCountedByTheRuntime(o: Outcome) {
  if (REAL_NODES) {
    expect(o.killedFrom).toBe('containerd of rnode-1, rnode-2, rnode-3 (container ids and start times before and after)');
    // the sample Deployment's six pods, one container each, were there to be killed
    expect(o.realContainersAtStart, 'containers running on the real nodes at the start').toBe(6);
  } else expect(o.killedFrom).toBe("the kubelet simulator's kill log of node-1, node-2, node-3");
}

function expectSafe(o: Outcome) {
  expect(o.evicted, "pods evicted, by the controller-manager's log").toEqual([]);
  expect(o.evictedSeenByRun, 'pods deleted by eviction, as the run saw them').toEqual([]);
  expectCountedByTheRuntime(o);
  expect(o.killed, 'containers killed or restarted').toEqual([]);
  expect(o.report.remaining, 'faults left applied').toEqual([]);
  expect(o.report.faults.every((f) => f.status === 'reverted')).toBe(true);
  expect(o.report.rollback?.complete).toBe(true);
}

const timeline = (o: Outcome) => readFileSync(join(o.reportDir, 'timeline.html'), 'utf8');

/**
 * The unguarded runs, per release. 1.34 evicts through the same taint-eviction controller (its own since 1.29) as
 * the default release, which shows kubelet-partition's cascade here and apiserver-outage's in test/e2e/demo.test.ts
 * (`npm run demo -- --compare`, real nodes); 1.20's node lifecycle controller evicts by itself, and shows
 * apiserver-outage's. 1.34 keeps its guarded runs: the guards' timing against its controller; its unguarded run is
 * etcd-slow-disk's, whose harm is the same on every release: Leases older than the grace period, and a controller-manager
 * that marks nodes NotReady or, as slow to write as the kubelets, loses its own leadership.
 */
const CASCADES: Record<string, string[]> = {
  '1.37': ['kubelet-partition'],
  '1.34': ['etcd-slow-disk'],
  '1.20': ['apiserver-outage'],
};
const cascades = (incident: string) => (CASCADES[LAB_VERSION] ?? [incident]).includes(incident);

/**
 * apiserver-outage runs here on the older releases. On the default release test/e2e/demo.test.ts runs it, with guards
 * and without, on three real nodes (the README's `npm run demo -- --compare`: nothing evicted by the
 * controller-manager's log, nothing killed by containerd), and the taint-eviction controller that the guarded run
 * freezes is the same one 1.34 runs (its own since 1.29): running it a third time would cost the default release's
 * lane, which runs alone, about 170 s.
 */
const OUTAGE = LAB_VERSION !== '1.37';

/**
 * On 1.34 the guarded apiserver-outage reaches its workers through node agents (privileged pods of the agent image; on
 * real nodes, real containers), the control plane over the lab's own transport, as a cluster without ssh to its
 * workers would: the agents ride out the outage they are part of, and end with the run. On 1.20 every node is
 * reached over the lab's transport.
 */
const OVER_AGENTS = LAB_VERSION === '1.34';

/** The evicted pods' containers, and only theirs, were killed on their own nodes, none restarted in place. */
function expectCascade(o: Outcome) {
  expect(o.evicted.length).toBeGreaterThan(0);
  // evictions are counted from the controller-manager's log; the run's own observer saw the same pods go
  expect(new Set(o.evictedSeenByRun.map((e) => e.pod))).toEqual(new Set(o.evicted.map((e) => e.pod)));
  expectCountedByTheRuntime(o);
  expect(o.killed.length).toBeGreaterThan(0);
  expect(new Set(o.killed.map((k) => k.pod))).toEqual(new Set(o.evicted.map((e) => e.pod)));
  expect(new Set(o.killed.map((k) => k.node))).toEqual(new Set(o.evicted.map((e) => e.node)));
  expect(o.restarted).toBe(0);
  if (REAL_NODES) for (const k of o.killed) expect(k.id, `${k.pod}'s container id in containerd`).toMatch(/^[0-9a-f]{64}$/);
  // the forecast is never late: its prediction is at or before the real first eviction
  expect(o.predicted).toBeDefined();
  expect(Date.parse(o.predicted!.at)).toBeLessThanOrEqual(Date.parse(o.evicted.map((e) => e.at).sort()[0]!));
  // the timeline marks every eviction with its cause
  for (const e of o.evicted) expect(timeline(o)).toContain(`${e.pod} on ${e.node} deleted (taint-eviction)`);
}

let agentLab: LabInfo | undefined;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, ...workerNodes(3), kubeadm: REAL_NODES });
  if (OVER_AGENTS) {
    agentLab = { ...lab, inventoryFile: agentInventory(lab) };
    await applyAgentManifests(lab, agentLab.inventoryFile);
  }
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
});

describe(`kubelet-partition (Kubernetes ${LAB_VERSION})`, () => {
  it('with guards: aborts before the first eviction; nothing evicted, nothing killed, every node Ready', async () => {
    await settled();
    const o = await runAndMeasure(lab, runbook('kubelet-partition.yaml'), true);
    expect(o.report.guardFirings.some((g) => g.guard === 'eviction forecast' && g.response === 'abort')).toBe(true);
    expectSafe(o);
    expect(timeline(o)).toMatch(/fired → abort: first eviction in/);
    expectObjectivesMet(o.report, `kubelet-partition on ${LAB_VERSION}`, [
      'every lease fresh again',
      'every node Ready again',
      'no unreachable taint left',
      'every Deployment available again',
    ]);
    await settled();
  });

  if (cascades('kubelet-partition'))
    it("without guards: the controller evicts the cut-off node's pods and the kubelet kills them on reconnect", async () => {
      const o = await runAndMeasure(lab, runbook('kubelet-partition.yaml'), false);
      expectCascade(o);
      await settled();
    });
});

if (OUTAGE)
  describe(`apiserver-outage (Kubernetes ${LAB_VERSION})`, () => {
    it(`with guards${OVER_AGENTS ? ', workers over agents' : ''}: freezes evictions before the first one (taint eviction off on 1.29+, else the controller-manager stopped) and restores it last`, async () => {
      const leaseTimes = new LeaseTimes(lab);
      onTestFinished(() => leaseTimes.stop());
      const o = await runAndMeasure(agentLab ?? lab, runbook('apiserver-outage.yaml'), true);
      expect(o.report.guardFirings.some((g) => g.response === 'remediate')).toBe(true);
      if (agentLab) {
        expect(o.report.preflight.find((p) => p.check === 'agents')?.detail).toMatch(
          /^\d agent pod\(s\) running and answering in kr-agent$/,
        );
        expect(o.report.faults.filter((f) => f.action === 'block-kubelet-egress').length).toBe(2);
        await agentPodsGone(lab, ' after the run');
      }
      const remediation = o.report.faults.filter((f) => f.remediation);
      const version = parseKubeVersion(lab.binaries?.version);
      expect(version?.minor, `the lab runs ${LAB_VERSION}`).toBe(Number(LAB_VERSION.split('.')[1]));
      const freeze = traitsOf(version).canDisableTaintEviction ? 'disable-taint-eviction' : 'stop-controller-manager';
      expect(remediation.map((f) => f.action)).toEqual([freeze]);
      // the controller-manager comes back only after every other fault is reverted
      const lastFault = o.report.faults
        .filter((f) => !f.remediation)
        .map((f) => f.revertedAt!)
        .sort()
        .at(-1)!;
      expect(remediation[0]!.revertedAt! > lastFault).toBe(true);
      // and, as the cluster itself tells it (apart from the run's report): the controller-manager's log says when it
      // evicted again, and by then every worker's Lease had been renewed within the grace period, as the apiserver stores
      // it; a freeze undone before that would let the controller taint and evict the nodes still catching up
      // (the Leases are read on until then: the controller-manager may lead, and evict, only after the run has ended)
      const backAt = await evictionsBackAt(lab, { afterMs: Date.parse(remediation[0]!.appliedAt!), minor: version!.minor });
      await leaseTimes.stop();
      expect(backAt, "the controller-manager's log line of its taint eviction starting again").toBeDefined();
      const grace = lab.settings.nodeMonitorGracePeriod;
      for (const n of lab.nodes.filter((x) => x.roles.includes('worker'))) {
        const renewed = leaseTimes.lastRenewalBy(n.name, backAt!);
        expect(renewed, `${n.name}'s Lease renewed before evictions came back`).toBeDefined();
        expect(
          backAt! - renewed!,
          `${n.name}: evictions back ${backAt! - renewed!} ms after its last renewal (grace ${grace} ms)`,
        ).toBeLessThan(grace);
      }
      console.log(
        `apiserver-outage on ${LAB_VERSION}: evictions back at ${new Date(backAt!).toISOString()}, the workers' last renewals ${lab.nodes
          .filter((x) => x.roles.includes('worker'))
          .map((n) => `${n.name} ${backAt! - leaseTimes.lastRenewalBy(n.name, backAt!)!} ms before`)
          .join(', ')}`,
      );
      // while the freeze holds the forecast predicts no eviction and says why, and so does the timeline
      const frozenBy =
        freeze === 'disable-taint-eviction' ? 'taint eviction disabled by this run' : 'kube-controller-manager stopped by this run';
      const settle = new Date(Date.parse(remediation[0]!.appliedAt!) + 1000).toISOString();
      const whileFrozen = o.report.guardReadings['eviction forecast']!.filter((r) => r.at > settle && r.at < remediation[0]!.revertedAt!);
      expect(whileFrozen.length, 'readings while the freeze held').toBeGreaterThan(0);
      expect(
        whileFrozen.filter((r) => (r.value as { earliestEviction: unknown } | null)?.earliestEviction),
        'evictions forecast while frozen',
      ).toEqual([]);
      expect(
        whileFrozen.filter((r) => r.status !== 'unknown').every((r) => r.detail.startsWith(`no eviction: ${frozenBy} (${freeze} on `)),
      ).toBe(true);
      // the timeline shows the guard's turns: on kubeadm's control plane the first reading that holds no eviction may
      // come before the freeze's apply returns, once the kubelet has stopped the controller-manager the edited
      // manifest replaces (no controller-manager leads then)
      expect(timeline(o)).toMatch(
        new RegExp(`no eviction: (${frozenBy} \\(${freeze} on |no kube-controller-manager holds kube-system/kube-controller-manager)`),
      );
      expectSafe(o);
      // the recovery objectives, measured from the last fault's revert: met, in report.json, JUnit and the timeline
      const objectives = o.report.objectives ?? [];
      console.log(
        `apiserver-outage on ${LAB_VERSION}: ${objectives.map((x) => `${x.name} ${x.status} after ${x.recoveryMs} ms`).join('; ')}`,
      );
      expect(objectives.map((x) => `${x.name}: ${x.status}`).sort()).toEqual([
        'every Deployment available again: met',
        'every lease fresh again: met',
        'every node Ready again: met',
      ]);
      // the nodes cut off, each timed to its own recovery
      const leases = objectives.find((x) => x.name === 'every lease fresh again')!;
      expect(leases.nodes?.recovered, 'nodes whose Lease was stale after the revert').toBeGreaterThan(0);
      expect(leases.nodes!.maxMs).toBeLessThanOrEqual(leases.recoveryMs!);
      for (const x of objectives) expect(x.recoveryMs, x.name).toBeLessThan(x.withinMs);
      const junit = readFileSync(join(o.reportDir, 'junit.xml'), 'utf8');
      for (const x of objectives) expect(junit).toContain(`<testcase classname="apiserver-outage.objectives" name="${x.name}"`);
      expect(timeline(o)).toContain('<h2>Recovery objectives</h2>');
      await settled();
    });

    if (cascades('apiserver-outage'))
      it("without guards: the cascade happens: the evicted pods' containers are killed", async () => {
        const o = await runAndMeasure(lab, runbook('apiserver-outage.yaml'), false);
        expectCascade(o);
        await settled();
      });
  });

describe(`etcd-slow-disk (Kubernetes ${LAB_VERSION})`, () => {
  it('lease renewals lag under the throttle, the guard fires, and no node goes NotReady', async () => {
    const since = realClock.now();
    const notReady = new NotReadyTimes(lab);
    onTestFinished(() => notReady.stop());
    const o = await runAndMeasure(lab, runbook('etcd-slow-disk.yaml'), true);
    await realClock.sleep(lab.settings.nodeMonitorPeriod + 1000);
    await notReady.stop();
    expect(notReady.between(since, realClock.now()), 'nodes whose Ready condition left True, as the apiserver stored it').toEqual([]);
    const throttle = o.report.faults.find((f) => f.action === 'throttle-etcd-disk')!;
    console.log(
      `etcd-slow-disk with guards on ${LAB_VERSION}: throttle held ${Date.parse(throttle.revertedAt!) - Date.parse(throttle.appliedAt!)} ms; the controller-manager's leadership lost ${(await leadershipLost(lab, Date.parse(throttle.appliedAt!), Date.parse(throttle.revertedAt!))).length} time(s)`,
    );
    const leases = o.report.guardTransitions.filter((t) => t.guard === 'leases renew in time' && t.status === 'violated');
    expect(leases.length, 'lease renewals lagged').toBeGreaterThan(0);
    expect(o.report.guardFirings.some((g) => g.guard === 'leases renew in time' && g.response === 'abort')).toBe(true);
    expect(o.report.guardTransitions.filter((t) => t.guard === 'no node NotReady' && t.status === 'violated')).toEqual([]);
    expectSafe(o);
    expectObjectivesMet(o.report, `etcd-slow-disk on ${LAB_VERSION}`, ['every lease fresh again', 'etcd writes fast again']);
    await settled();
  });

  if (cascades('etcd-slow-disk'))
    it('without guards, the same throttle for as long: renewals stall past the grace period; the controller marks a node NotReady or loses its own lease', async () => {
      const notReady = new NotReadyTimes(lab);
      const leaseTimes = new LeaseTimes(lab);
      onTestFinished(() => Promise.all([notReady.stop(), leaseTimes.stop()]).then(() => undefined));
      const o = await runAndMeasure(lab, runbook('etcd-slow-disk.yaml'), false);
      await Promise.all([notReady.stop(), leaseTimes.stop()]);
      const throttle = o.report.faults.find((f) => f.action === 'throttle-etcd-disk')!;
      const [from, to] = [Date.parse(throttle.appliedAt!), Date.parse(throttle.revertedAt!)];
      const grace = lab.settings.nodeMonitorGracePeriod;
      const gaps = lab.nodes
        .filter((n) => n.roles.includes('worker'))
        .map((n) => ({ node: n.name, gap: leaseTimes.longestGap(n.name, from, to + grace, grace) }));
      const seen = notReady.between(from, to);
      const lost = await leadershipLost(lab, from, to);
      console.log(
        `etcd-slow-disk without guards on ${LAB_VERSION}: longest wait between stored renewals ${gaps.map((g) => `${g.node} ${g.gap} ms`).join(', ')} (grace ${grace} ms); not Ready while the throttle held: ${seen.map((x) => `${x.node} ${x.reason} from ${x.at}`).join(', ') || 'none'}; the controller-manager's leadership lost ${lost.length} time(s); its log: ${await controllerSaid(lab, from, to + grace)}`,
      );
      // the harm the lease guard stops at 5 s: a Lease older than the grace period, which a leading controller marks
      // NotReady; under this throttle the controller-manager's own Lease is a write as slow as the kubelets', so it
      // either marks nodes NotReady or, its renewals as late as theirs, loses its leadership (and restarts): both
      // are what incident 3's slow disk did, and both are counted here apart from the executor
      expect(
        gaps.filter((g) => g.gap > grace).map((g) => g.node),
        'workers whose stored renewals stalled longer than the grace period',
      ).not.toEqual([]);
      expect(
        seen.length + lost.length,
        "nodes whose Ready condition left True, plus the controller-manager's lost leaderships, while etcd's disk was slow",
      ).toBeGreaterThan(0);
      expect(o.report.remaining, 'faults left applied').toEqual([]);
      await settled();
    });
});
