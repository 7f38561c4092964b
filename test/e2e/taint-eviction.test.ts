import { join } from 'node:path';
import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RevertState } from '../../src/contract/action.js';
import type { ActionCtx } from '../../src/contract/context.js';
import { realClock } from '../../src/core/clock.js';
import { defaultRegistry } from '../../src/engine/registry.js';
import type { KubeAccess } from '../../src/kube/types.js';
import { inNetns, LAB_VERSION, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';
import { labContext } from './helpers/lab-context.js';
import type { Reading } from '../../src/contract/probe.js';
import type { Deletion } from '../../src/kube/deletions.js';
import forecastProbe, { type EvictionForecastValue } from '../../src/probes/eviction-forecast.js';
import deletionsProbe from '../../src/probes/pod-deletions.js';

/**
 * disable-taint-eviction on the real controller-manager (1.29+): with a node NotReady and tainted past the
 * toleration, no pod is evicted while every other controller keeps working (a Deployment scaled meanwhile gets its
 * new pods); after the revert the taint-eviction controller evicts as usual, and says so in DisruptionTarget.
 */
const INSTANCE = 'dte';
const TOLERATION = 10_000;
let lab: LabInfo;
let core: CoreV1Api;
let apps: AppsV1Api;
let objects: KubernetesObjectApi;
let kube: KubeAccess;
let ctx: ActionCtx;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3, grace: '8s', monitorPeriod: '1s', toleration: '10s', leaseRenew: '2s' });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
  apps = kc.makeApiClient(AppsV1Api);
  objects = KubernetesObjectApi.makeApiClient(kc);
  const base = (await labContext(lab, { runId: `e2e-dte-${process.pid}` })).ctx;
  kube = base.kube;
  ctx = { ...base, node: base.inventory.spec.nodes.find((n) => n.name === 'cp-1') };
});

afterAll(async () => {
  kube?.close?.();
  await stopLab(INSTANCE);
});

const kubelet = (node: string, script: string) =>
  inNetns(`kr-${INSTANCE}-${node}`, `'${join(lab.stateDir, 'nodes', node, 'kubelet', script)}'`);
const demoPods = async (): Promise<V1Pod[]> => (await core.listNamespacedPod({ namespace: 'demo' })).items;
const tainted = (n: V1Node) => n.spec?.taints?.some((t) => t.key === 'node.kubernetes.io/unreachable' && t.effect === 'NoExecute') ?? false;
const deleting = (pods: V1Pod[], node: string) => pods.filter((p) => p.spec?.nodeName === node && p.metadata?.deletionTimestamp);

describe(`disable-taint-eviction (Kubernetes ${LAB_VERSION})`, () => {
  it('no eviction past the toleration while other controllers run; after the revert the controller evicts, marked DeletionByTaintManager', async () => {
    const action = await defaultRegistry.action('disable-taint-eviction');
    const params = action.meta.params.parse({ timeout: '1m' });
    await action.preflight!(ctx, params);
    const state = (await action.apply(ctx, await action.prepare(ctx, params))) as RevertState;
    let reverted = false;
    try {
      // both eviction paths off where the device taint eviction controller runs by default (1.36+)
      const kcm = await inNetns(`kr-${INSTANCE}-cp-1`, `pgrep -af -- '${join(lab.stateDir, 'nodes', 'cp-1', 'kube-controller-manager')}'`);
      expect(kcm.stdout).toMatch(
        Number(LAB_VERSION.split('.')[1]) >= 36
          ? /--controllers=\*,-taint-eviction-controller,-device-taint-eviction-controller(\s|$)/m
          : /--controllers=\*,-taint-eviction-controller(\s|$)/m,
      );
      const victims = (await demoPods()).filter((p) => p.spec?.nodeName === 'node-1');
      expect(victims.length).toBeGreaterThan(0);
      expect((await kubelet('node-1', 'stop')).code).toBe(0);
      await until('node-1 NotReady and tainted NoExecute', async () => tainted(await core.readNode({ name: 'node-1' })), 60_000, 200);
      const taintedAt = realClock.now();

      // the other controllers work: a Deployment scaled now gets its pods
      const before = (await demoPods()).length;
      const scale = await apps.readNamespacedDeploymentScale({ name: 'demo', namespace: 'demo' });
      const replicas = (scale.spec?.replicas ?? 0) + 2;
      await apps.replaceNamespacedDeploymentScale({ name: 'demo', namespace: 'demo', body: { ...scale, spec: { replicas } } });
      await until('the scaled Deployment to get its new pods', async () => (await demoPods()).length >= before + 2, 60_000, 200);

      // well past the toleration: the taint-eviction controller would have evicted by now
      await realClock.sleep(Math.max(0, taintedAt + TOLERATION + 15_000 - realClock.now()));
      expect(tainted(await core.readNode({ name: 'node-1' })), 'node-1 still tainted').toBe(true);
      expect(
        deleting(await demoPods(), 'node-1').map((p) => p.metadata!.name),
        'pods evicted while taint eviction is off',
      ).toEqual([]);

      await action.revert(ctx, state);
      reverted = true;
      await until(
        "the taint-eviction controller to evict node-1's pods",
        async () => deleting(await demoPods(), 'node-1').length > 0,
        90_000,
        200,
      );
      const evicted = deleting(await demoPods(), 'node-1');
      for (const p of evicted)
        expect(
          p.status?.conditions?.find((c) => c.type === 'DisruptionTarget'),
          `${p.metadata!.name} DisruptionTarget`,
        ).toMatchObject({
          status: 'True',
          reason: 'DeletionByTaintManager',
        });
    } finally {
      if (!reverted) await action.revert(ctx, state).catch(() => {});
      await kubelet('node-1', 'start');
    }
  });

  it('a NoExecute DeviceTaintRule on an allocated device: the device-taint-eviction-controller evicts, forecast in time and named', async () => {
    // a ResourceSlice by hand (a fake driver, one device on node-2), allocated by the real scheduler; the simulated
    // kubelet runs the pod without any DRA plugin. The claim tolerates the taint for 3 s.
    const DRIVER = 'fake.example.com';
    const NS = 'dra';
    const v1 = 'resource.k8s.io/v1';
    const made: (KubernetesObject & { spec?: unknown })[] = [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
      {
        apiVersion: v1,
        kind: 'DeviceClass',
        metadata: { name: 'fake-gpu' },
        spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
      },
      {
        apiVersion: v1,
        kind: 'ResourceSlice',
        metadata: { name: 'node-2-fake' },
        spec: {
          driver: DRIVER,
          nodeName: 'node-2',
          pool: { name: 'node-2', generation: 1, resourceSliceCount: 1 },
          devices: [{ name: 'gpu-0' }],
        },
      },
      {
        apiVersion: v1,
        kind: 'ResourceClaim',
        metadata: { name: 'gpu', namespace: NS },
        spec: {
          devices: {
            requests: [
              {
                name: 'gpu',
                exactly: {
                  deviceClassName: 'fake-gpu',
                  tolerations: [{ key: 'example.com/broken', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 3 }],
                },
              },
            ],
          },
        },
      },
    ];
    const rule: KubernetesObject & { spec: unknown } = {
      apiVersion: v1,
      kind: 'DeviceTaintRule',
      metadata: { name: 'broken-gpu' },
      spec: {
        deviceSelector: { driver: DRIVER, pool: 'node-2', device: 'gpu-0' },
        taint: { key: 'example.com/broken', effect: 'NoExecute' },
      },
    };
    const { ctx: probeCtx, close } = await labContext(lab);
    const forecasts: Reading[] = [];
    const deletions: Reading[] = [];
    const pumps: Promise<void>[] = [];
    try {
      for (const o of made) await objects.create(o);
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: 'gpu-user' },
          spec: {
            resourceClaims: [{ name: 'gpu', resourceClaimName: 'gpu' }],
            containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.2', resources: { claims: [{ name: 'gpu' }] } }],
          },
        },
      });
      await until(
        'gpu-user scheduled on node-2 with its claim and running',
        async () => {
          const p = await core.readNamespacedPod({ name: 'gpu-user', namespace: NS });
          return p.spec?.nodeName === 'node-2' && p.status?.phase === 'Running';
        },
        30_000,
        200,
      );
      const start = (probe: typeof forecastProbe | typeof deletionsProbe, params: unknown, into: Reading[]) =>
        pumps.push(
          (async () => {
            for await (const r of probe.start(probeCtx, probe.meta.params.parse(params) as never)) into.push(r);
          })().catch(() => {}),
        );
      start(forecastProbe, { namespaces: [NS], margin: '1s' }, forecasts);
      start(deletionsProbe, { namespaces: [NS] }, deletions);
      await until(
        'both probes to read ok',
        async () => forecasts.at(-1)?.status === 'ok' && deletions.at(-1)?.status === 'ok',
        30_000,
        100,
      );
      expect(forecasts.at(-1)!.detail).toMatch(/^no eviction predicted/);

      await objects.create(rule);
      const ruleAt = realClock.now();
      const deleted = (): Deletion | undefined =>
        (deletions.at(-1)?.value as { deletions?: Deletion[] } | null)?.deletions?.find((d) => d.pod === `${NS}/gpu-user`);
      await until('the device taint eviction controller to delete gpu-user', async () => deleted() !== undefined, 30_000, 100);
      const d = deleted()!;
      expect(d).toMatchObject({ node: 'node-2', cause: 'device-taint-eviction' });
      const p = await core.readNamespacedPod({ name: 'gpu-user', namespace: NS }).catch(() => undefined);
      if (p)
        expect(p.status?.conditions?.find((c) => c.type === 'DisruptionTarget')).toMatchObject({ reason: 'DeletionByDeviceTaintManager' });

      // the forecast named the taint and the device, and said so no later than the deletion came
      const first = forecasts.find((r) => (r.value as EvictionForecastValue | null)?.earliestEviction?.pod === `${NS}/gpu-user`);
      expect(first, 'a forecast of gpu-user').toBeDefined();
      expect(first!.detail).toContain(`device taint broken-gpu on ${DRIVER}/node-2/gpu-0`);
      const predicted = (first!.value as EvictionForecastValue).earliestEviction!.at;
      expect(predicted, 'forecast eviction time vs. the deletion seen').toBeLessThanOrEqual(d.at);
      expect(first!.at).toBeLessThanOrEqual(d.at);
      const iso = (t: number) => new Date(t).toISOString();
      console.log(
        `DeviceTaintRule created ${iso(ruleAt)}; forecast at ${iso(first!.at)}: eviction at ${iso(predicted)}; deletion seen ${iso(d.at)} (${d.cause})`,
      );
    } finally {
      await close(() => Promise.all(pumps));
      await objects.delete(rule).catch(() => {});
      await core.deleteNamespacedPod({ name: 'gpu-user', namespace: NS, gracePeriodSeconds: 0 }).catch(() => {});
      for (const o of [...made].reverse()) await objects.delete(o).catch(() => {});
    }
  });
});
