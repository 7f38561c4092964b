import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RevertState } from '../../src/contract/action.js';
import type { ActionCtx } from '../../src/contract/context.js';
import { realClock } from '../../src/core/clock.js';
import { defaultRegistry } from '../../src/engine/registry.js';
import type { KubeAccess } from '../../src/kube/types.js';
import { inNetns, LAB_VERSION, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';
import { labContext } from './helpers/lab-context.js';

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
let kube: KubeAccess;
let ctx: ActionCtx;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3, grace: '8s', monitorPeriod: '1s', toleration: '10s', leaseRenew: '2s' });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
  apps = kc.makeApiClient(AppsV1Api);
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
});
