import { AppsV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ctx } from '../../src/contract/context.js';
import type { Reading } from '../../src/contract/probe.js';
import { realClock } from '../../src/core/clock.js';
import { memoryLogger } from '../../src/core/logger.js';
import { defaultRegistry } from '../../src/engine/registry.js';
import { loadInventory } from '../../src/inventory/load.js';
import { createKubeAccess } from '../../src/kube/client.js';
import type { KubeAccess } from '../../src/kube/types.js';
import { createNodeAccess } from '../../src/nodes/access.js';
import { type LabInfo, LAB_VERSION, startLab, stopLab, until } from './helpers/lab.js';

/**
 * kubernetes-object and workload-availability watch (they do not poll): a Deployment scaled down in the lab is seen
 * by both within a second of the scale call returning.
 */
const INSTANCE = 'p13a';
let lab: LabInfo;
let apps: AppsV1Api;
let kube: KubeAccess;
let ctx: Ctx;
const ac = new AbortController();

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 2 });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  apps = kc.makeApiClient(AppsV1Api);
  const { inventory } = await loadInventory(lab.inventoryFile);
  const log = memoryLogger();
  kube = createKubeAccess({ kubeconfig: lab.kubeconfig, context: lab.context, clock: realClock, log });
  ctx = { runId: 'e2e-p13a', clock: realClock, log, signal: ac.signal, dryRun: false, inventory, kube, nodes: createNodeAccess(inventory) };
});

afterAll(async () => {
  ac.abort();
  kube?.close?.();
  await stopLab(INSTANCE);
});

async function watchProbe(id: string, params: Record<string, unknown>): Promise<Reading[]> {
  const probe = await defaultRegistry.probe(id);
  const list: Reading[] = [];
  void (async () => {
    for await (const r of probe.start(ctx, probe.meta.params.parse(params))) list.push(r);
  })();
  return list;
}

describe(`kubernetes-object and workload-availability in the lab (Kubernetes ${LAB_VERSION})`, () => {
  it('see a Deployment scaled down within 1 s', async () => {
    const scale = await apps.readNamespacedDeploymentScale({ name: 'demo', namespace: 'demo' });
    const replicas = scale.spec?.replicas ?? 0;
    expect(replicas).toBeGreaterThanOrEqual(2);
    const object = await watchProbe('kubernetes-object', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      namespace: 'demo',
      name: 'demo',
      condition: `object.spec.replicas >= ${replicas} && object.status.readyReplicas >= ${replicas}`,
    });
    const avail = await watchProbe('workload-availability', { kind: 'Deployment', namespace: 'demo', name: 'demo', minReady: replicas });
    await until('both probes to read ok', () => object.at(-1)?.status === 'ok' && avail.at(-1)?.status === 'ok', 120_000, 100);

    // timed from the request: the watch event can arrive before the answer to the request does
    const scaledAt = realClock.now();
    // without the resourceVersion read above: the Deployment's status has changed since (a conflict otherwise)
    await apps.replaceNamespacedDeploymentScale({
      name: 'demo',
      namespace: 'demo',
      body: { metadata: { name: 'demo', namespace: 'demo' }, spec: { replicas: replicas - 1 } },
    });
    await until('kubernetes-object to be violated', () => object.some((r) => r.at >= scaledAt && r.status === 'violated'), 10_000, 20);
    await until(
      'workload-availability to see the new size',
      () => avail.some((r) => r.at >= scaledAt && (r.value as { wanted?: number })?.wanted === replicas - 1),
      10_000,
      20,
    );
    const objectMs = object.find((r) => r.at >= scaledAt && r.status === 'violated')!.at - scaledAt;
    const availMs = avail.find((r) => r.at >= scaledAt && (r.value as { wanted?: number })?.wanted === replicas - 1)!.at - scaledAt;
    console.log(`seen after the scale request was sent: kubernetes-object ${objectMs} ms, workload-availability ${availMs} ms`);
    expect(objectMs).toBeLessThanOrEqual(1000);
    expect(availMs).toBeLessThanOrEqual(1000);
    // the Deployment's ready count follows once its pod is gone: below minReady, violated
    await until('workload-availability to be violated', () => avail.some((r) => r.at >= scaledAt && r.status === 'violated'), 60_000, 100);
  });
});
