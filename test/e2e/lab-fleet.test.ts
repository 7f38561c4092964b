import type { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { memoryLogger } from '../../src/core/logger.js';
import { FLEET_LABEL, runFleet, type FleetStats } from '../../packages/lab/src/sim/fleet.js';
import { readRuntime } from '../../packages/lab/src/index.js';
import { coreApi, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

/** Fleet mode: many simulated kubelets in this process, against the lab's real control plane. */
const INSTANCE = 'e2efl';
const COUNT = 60;
let lab: LabInfo;
let core: CoreV1Api;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 1, workload: false, grace: '8s', leaseRenew: '2s' });
  core = coreApi(lab);
});

afterAll(async () => {
  await stopLab(INSTANCE);
  expect(await leftovers(INSTANCE)).toEqual([]);
});

const readyFleet = async () =>
  (await core.listNode({ labelSelector: `${FLEET_LABEL}=${INSTANCE}` })).items.filter(
    (n) => n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True',
  ).length;

describe('lab fleet', () => {
  it('keeps its nodes Ready past the grace period, runs a pod bound to one and kills it on deletion, then removes its nodes', async () => {
    const stop = new AbortController();
    const progress: FleetStats[] = [];
    const fleet = runFleet(
      {
        instance: INSTANCE,
        count: COUNT,
        zones: 3,
        leaseRenewMs: 2000,
        progressMs: 1000,
        log: memoryLogger(),
        onProgress: (s) => progress.push(s),
      },
      stop.signal,
    );
    try {
      await until(`${COUNT} fleet nodes Ready`, async () => (await readyFleet()) === COUNT, 60_000, 500);
      const zones = new Set(
        (await core.listNode({ labelSelector: `${FLEET_LABEL}=${INSTANCE}` })).items.map(
          (n) => n.metadata?.labels?.['topology.kubernetes.io/zone'],
        ),
      );
      expect([...zones].sort()).toEqual(['zone-a', 'zone-b', 'zone-c']);

      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'on-fleet' },
          spec: { nodeName: 'fleet-00003', automountServiceAccountToken: false, containers: [{ name: 'c', image: 'pause' }] },
        },
      });
      await until(
        'the pod Running on fleet-00003',
        async () => (await core.readNamespacedPod({ name: 'on-fleet', namespace: 'default' })).status?.phase === 'Running',
        20_000,
      );
      expect((await readRuntime(lab.stateDir, 'fleet-00003')).containers.map((c) => c.pod)).toEqual(['on-fleet']);

      // hold past two grace periods: nobody may go NotReady
      await realClock.sleep(16_000);
      expect(await readyFleet()).toBe(COUNT);
      const last = progress[progress.length - 1]!;
      expect(last).toMatchObject({ count: COUNT, ready: COUNT, renewing: COUNT, flaps: 0 });
      expect(last.maxRenewGapMs).toBeLessThan(8_000);

      await core.deleteNamespacedPod({ name: 'on-fleet', namespace: 'default' });
      await until('the container killed', async () => (await readRuntime(lab.stateDir, 'fleet-00003')).kills.length === 1, 20_000);
      await until(
        'the pod gone',
        async () => !(await core.listNamespacedPod({ namespace: 'default' })).items.some((p) => p.metadata?.name === 'on-fleet'),
        20_000,
      );
    } finally {
      stop.abort();
      await fleet;
    }
    expect((await core.listNode({ labelSelector: `${FLEET_LABEL}=${INSTANCE}` })).items).toEqual([]);
  });
});
