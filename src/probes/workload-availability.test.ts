import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import type { RawObject } from '../kube/source.js';
import { ProbeTester } from '../testing/probe-tester.js';
import probe from './workload-availability.js';

let t: ProbeTester;
afterEach(async () => t.close());

const DEPLOYMENTS = '/apis/apps/v1/namespaces/shop/deployments';
const DAEMONSETS = '/apis/apps/v1/namespaces/shop/daemonsets';

const deployment = (name: string, replicas: number, ready: number | undefined, labels = { tier: 'frontend' }): RawObject => ({
  metadata: { namespace: 'shop', name, labels },
  spec: { replicas },
  status: ready === undefined ? {} : { readyReplicas: ready },
});

describe('workload-availability', () => {
  it('keeps a percentage of each Deployment ready and is violated on the event that drops one below', async () => {
    t = new ProbeTester();
    t.api.put(DEPLOYMENTS, deployment('web', 5, 5));
    t.api.put(DEPLOYMENTS, deployment('api', 3, 3));
    t.api.put(DEPLOYMENTS, deployment('batch', 3, 0, { tier: 'backend' }));
    const run = t.start(probe, { kind: 'Deployment', namespace: 'shop', selector: 'tier=frontend', minReady: '80%' });
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('2 Deployments at or above minimum; ready 8/8');
    expect(t.api.calls.find((c) => c.kind === 'list')?.path).toBe(DEPLOYMENTS);
    t.api.put(DEPLOYMENTS, deployment('web', 5, 4)); // 80% of 5 is 4: still fine
    await t.advance(0);
    expect(run.last()?.status).toBe('ok');
    const at = t.clock.now();
    t.api.put(DEPLOYMENTS, deployment('api', 3, undefined)); // readyReplicas omitted: 0 ready
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(at);
    expect(v.detail).toBe('1/2 below minimum: shop/api 0/3 ready (needs 3)');
    expect(v.value).toMatchObject({ ready: 4, wanted: 8 });
  });

  it('counts DaemonSets by numberReady against a fixed minimum, and is violated when none is selected', async () => {
    t = new ProbeTester();
    t.api.put(DAEMONSETS, {
      metadata: { namespace: 'shop', name: 'agent', labels: {} },
      status: { desiredNumberScheduled: 4, numberReady: 3 },
    });
    const run = t.start(probe, { kind: 'DaemonSet', namespace: 'shop', minReady: 3 });
    expect((await run.until((r) => r.status !== 'unknown')).detail).toBe('shop/agent 3/4 ready (needs 3)');
    const none = t.start(probe, { kind: 'StatefulSet', namespace: 'shop' });
    expect(await none.until((r) => r.status !== 'unknown')).toMatchObject({ status: 'violated', detail: 'no StatefulSet selected' });
  });

  it('counts the ready endpoints of Services from their EndpointSlices', async () => {
    t = new ProbeTester();
    t.kube.rawHandler = (path) => (path === '/apis/discovery.k8s.io/v1' ? { status: 200, body: '{}' } : { status: 404, body: '' });
    t.api.put(paths.services, {
      metadata: { namespace: 'shop', name: 'checkout', labels: { tier: 'frontend' } },
      spec: { selector: { app: 'checkout' } },
    });
    t.api.put(paths.services, { metadata: { namespace: 'shop', name: 'db', labels: { tier: 'backend' } }, spec: {} });
    const slice = (name: string, ready: boolean[]): RawObject => ({
      metadata: { namespace: 'shop', name, labels: { 'kubernetes.io/service-name': 'checkout' } },
      endpoints: ready.map((r) => ({ conditions: { ready: r } })),
    });
    const SLICES = paths.endpointSlices('v1');
    t.api.put(SLICES, slice('checkout-a', [true, true]));
    t.api.put(SLICES, slice('checkout-b', [true, false]));
    const run = t.start(probe, { kind: 'Service', namespace: 'shop', selector: 'tier=frontend', minReady: 3 });
    expect(await run.until((r) => r.status !== 'unknown')).toMatchObject({
      status: 'ok',
      detail: 'shop/checkout 3/4 ready endpoints (needs 3)',
    });
    t.api.put(SLICES, slice('checkout-a', [true, false]));
    expect((await run.until((r) => r.status === 'violated')).detail).toBe('1/1 below minimum: shop/checkout 2/4 ready endpoints (needs 3)');
  });

  it('rejects minimums that are neither a number nor a percentage', () => {
    expect(probe.meta.params.safeParse({ kind: 'Deployment', minReady: '80' }).success).toBe(false);
    expect(probe.meta.params.safeParse({ kind: 'Deployment', minReady: '120%' }).success).toBe(false);
    expect(probe.meta.params.safeParse({ kind: 'Deployment', selector: 'a b' }).success).toBe(false);
  });
});
