import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { parseKubeVersion, traitsOf } from '../../src/kube/versions.js';
import { labNames, readRuntime } from '../../packages/lab/src/index.js';
import { inNetns, instanceFor, LAB_VERSION, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

/**
 * Incident 1's mechanism on the real controller-manager: a kubelet goes silent, the node lifecycle controller
 * marks its node NotReady and taints it NoExecute, the taint manager marks its pods for deletion after their
 * toleration, and when the kubelet comes back it kills the containers that kept running meanwhile.
 */
const INSTANCE = instanceFor('ev');
const GRACE = 8_000;
const MONITOR = 1_000;
/** Monitor passes from the grace period's end to the NoExecute taint: 1.20 queues a node the pass after it marks it. */
const TAINT_PASSES = LAB_VERSION === '1.20' ? 2 : 1;
const TOLERATION = 10_000;
let lab: LabInfo;
let core: CoreV1Api;
let leases: CoordinationV1Api;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3, grace: GRACE, monitorPeriod: MONITOR, toleration: TOLERATION, leaseRenew: '2s' });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
  leases = kc.makeApiClient(CoordinationV1Api);
});

afterAll(async () => {
  await stopLab(INSTANCE);
  expect(await leftovers(INSTANCE)).toEqual([]);
});

const kubelet = (script: string) =>
  inNetns(labNames(INSTANCE).netns('node-1'), `'${join(lab.stateDir, 'nodes', 'node-1', 'kubelet', script)}'`);
const podsOn = async (node: string): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace: 'demo', fieldSelector: `spec.nodeName=${node}` })).items;
const noExecute = (n: V1Node) => n.spec?.taints?.find((t) => t.key === 'node.kubernetes.io/unreachable' && t.effect === 'NoExecute');

describe(`a silent kubelet on the real controller-manager (incident 1, Kubernetes ${LAB_VERSION})`, () => {
  it(`NotReady and NoExecute within grace + ${TAINT_PASSES} monitor period(s) + 2 s, pods marked after the toleration, containers killed on return`, async () => {
    const victims = (await podsOn('node-1')).map((p) => p.metadata!.uid!).sort();
    expect(victims.length).toBeGreaterThan(0);
    expect((await readRuntime(lab.stateDir, 'node-1')).containers.map((c) => c.podUid).sort()).toEqual(victims);

    expect((await kubelet('stop')).code).toBe(0);
    const lease = await leases.readNamespacedLease({ name: 'node-1', namespace: 'kube-node-lease' });
    const lastRenewal = new Date(lease.spec!.renewTime!).getTime();

    let tainted: V1Node | undefined;
    await until(
      'node-1 NotReady with the NoExecute taint',
      async () => {
        const n = await core.readNode({ name: 'node-1' });
        const ready = n.status?.conditions?.find((c) => c.type === 'Ready')?.status;
        if (ready !== 'True' && noExecute(n)) tainted = n;
        return Boolean(tainted);
      },
      GRACE + MONITOR + 20_000,
      100,
    );
    const seenAt = realClock.now();
    const taintAt = new Date(noExecute(tainted!)!.timeAdded!).getTime();
    process.stderr.write(`[lab] last renewal → NoExecute taint: ${taintAt - lastRenewal} ms (seen after ${seenAt - lastRenewal} ms)\n`);
    expect(seenAt - lastRenewal).toBeLessThanOrEqual(GRACE + TAINT_PASSES * MONITOR + 2_000);
    expect(taintAt - lastRenewal).toBeGreaterThanOrEqual(GRACE - 1_000);
    expect(await podsOn('node-2').then((ps) => ps.every((p) => !p.metadata?.deletionTimestamp))).toBe(true);

    let markedAt = 0;
    let marked: V1Pod[] = [];
    await until(
      "node-1's pods marked for deletion",
      async () => {
        marked = (await podsOn('node-1')).filter((p) => victims.includes(p.metadata!.uid!) && p.metadata?.deletionTimestamp);
        if (marked.length === victims.length) markedAt = realClock.now();
        return markedAt > 0;
      },
      TOLERATION + 30_000,
      100,
    );
    process.stderr.write(`[lab] NoExecute taint → pods marked for deletion: ${markedAt - taintAt} ms\n`);
    expect(markedAt - taintAt).toBeGreaterThanOrEqual(TOLERATION - 1_000);
    // which controller evicted, as the server says it: DisruptionTarget/DeletionByTaintManager since 1.26, nothing before
    const traits = traitsOf(parseKubeVersion(lab.binaries?.version));
    const reasons = marked.map((p) => p.status?.conditions?.find((c) => c.type === 'DisruptionTarget')?.reason ?? 'none');
    process.stderr.write(
      `[lab] Kubernetes ${lab.binaries?.version}: evicted by ${traits.taintEvictor}; DisruptionTarget: ${[...new Set(reasons)].join(', ')}\n`,
    );
    expect(reasons).toEqual(marked.map(() => (traits.writesDisruptionTarget ? 'DeletionByTaintManager' : 'none')));

    // the kubelet is away: its containers keep running, nobody kills them
    const away = await readRuntime(lab.stateDir, 'node-1');
    expect(away.containers.map((c) => c.podUid).sort()).toEqual(victims);
    expect(away.kills).toEqual([]);

    expect((await kubelet('start')).code).toBe(0);
    await until(
      'the kubelet to kill the containers of the marked pods',
      async () => (await readRuntime(lab.stateDir, 'node-1')).kills.length >= victims.length,
      30_000,
    );
    const back = await readRuntime(lab.stateDir, 'node-1');
    expect(back.kills.map((k) => k.podUid).sort()).toEqual(victims);
    for (const k of back.kills) {
      expect(k.reason).toMatch(/^pod marked for deletion/);
      expect(k.atMs).toBeGreaterThan(markedAt - 1_000);
    }
    expect(back.containers.filter((c) => victims.includes(c.podUid))).toEqual([]);

    await until(
      'the deletions to be finalized',
      async () => (await podsOn('node-1')).every((p) => !victims.includes(p.metadata!.uid!)),
      30_000,
    );
    await until(
      'node-1 Ready and untainted again',
      async () => {
        const n = await core.readNode({ name: 'node-1' });
        return n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' && !noExecute(n);
      },
      30_000,
    );
  });
});
