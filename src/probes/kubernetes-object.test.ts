import { afterEach, describe, expect, it } from 'vitest';
import type { RawObject } from '../kube/source.js';
import { ProbeTester } from '../testing/probe-tester.js';
import probe from './kubernetes-object.js';
import { celProblem } from './parts/cel.js';

let t: ProbeTester;
afterEach(async () => t.close());

const APPS = JSON.stringify({
  resources: [
    { name: 'deployments', kind: 'Deployment', namespaced: true },
    { name: 'deployments/scale', kind: 'Scale', namespaced: true },
  ],
});
const SHOP = '/apis/apps/v1/namespaces/shop/deployments';

function deployment(
  name: string,
  replicas: number,
  available: number | undefined,
  labels: Record<string, string> = { app: 'checkout' },
): RawObject {
  return {
    metadata: { namespace: 'shop', name, labels, managedFields: [{ manager: 'kubectl' }] },
    spec: { replicas },
    status: available === undefined ? {} : { availableReplicas: available },
  };
}

function tester() {
  t = new ProbeTester();
  t.kube.rawHandler = (path) => (path === '/apis/apps/v1' ? { status: 200, body: APPS } : { status: 404, body: 'not found' });
  return t;
}

const condition = 'object.status.availableReplicas >= object.spec.replicas - 1';

describe('kubernetes-object', () => {
  it('finds the resource by discovery, evaluates the CEL condition per object and turns violated on the event that breaks it', async () => {
    tester();
    t.api.put(SHOP, deployment('checkout', 3, 3));
    t.api.put(SHOP, deployment('cart', 2, 0, { app: 'cart' }));
    t.api.put(SHOP, deployment('other', 2, 0, { app: 'other' }));
    const run = t.start(probe, { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', selector: 'app in (checkout)', condition });
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('1/1 Deployment meet the condition (all must)');
    expect(t.api.calls.find((c) => c.kind === 'list')?.path).toBe(SHOP);
    t.api.put(SHOP, deployment('checkout', 3, 2));
    await t.advance(0);
    expect(run.last()?.status).toBe('ok');
    const changedAt = t.clock.now();
    t.api.put(SHOP, deployment('checkout', 3, 1));
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(changedAt);
    expect(v.detail).toBe('0/1 Deployment meet the condition (all must); not: shop/checkout');
    expect(v.value).toEqual({ met: 0, total: 1, objects: [{ object: 'shop/checkout', ok: false }] });
  });

  it('aggregates with any and atLeast, and says why an object cannot be evaluated', async () => {
    tester();
    t.api.put(SHOP, deployment('a', 3, 3, {}));
    t.api.put(SHOP, deployment('b', 3, undefined, {}));
    t.api.put(SHOP, deployment('c', 3, 0, {}));
    const any = t.start(probe, { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', condition, aggregate: 'any' });
    const two = t.start(probe, { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', condition, aggregate: { atLeast: 2 } });
    expect((await any.until((r) => r.status !== 'unknown')).status).toBe('ok');
    const v = await two.until((r) => r.status !== 'unknown');
    expect(v.status).toBe('violated');
    expect(v.detail).toBe('1/3 Deployment meet the condition (at least 2 must); not: shop/b (No such key: availableReplicas), shop/c');
  });

  it('spends a bounded cost per judgement: objects left over are judged in the next one, unknown meanwhile', async () => {
    tester();
    // each object costs about 870,000 of the 2,000,000 a judgement may spend: two a judgement
    const items = Array.from({ length: 330 }, (_, i) => i);
    for (const name of ['a', 'b', 'c', 'd', 'e']) t.api.put(SHOP, { ...deployment(name, 1, 1), spec: { replicas: 1, items } });
    const run = t.start(probe, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      namespace: 'shop',
      condition: 'object.spec.items.all(a, object.spec.items.all(b, a + b >= 0))',
    });
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('5/5 Deployment meet the condition (all must)');
    const waiting = run.readings.filter((r) => r.status === 'unknown' && r.detail.includes('not judged yet')).map((r) => r.detail);
    expect(waiting).toEqual([
      '3 of 5 Deployment not judged yet: the condition costs more than 2,000,000 over them, judging on',
      '1 of 5 Deployment not judged yet: the condition costs more than 2,000,000 over them, judging on',
    ]);
    // a verdict is kept until its object changes: one change costs one evaluation
    t.api.put(SHOP, { ...deployment('c', 1, 1), spec: { replicas: 1, items: [-1000, 1] } });
    const v = await run.until((r) => r.status === 'violated');
    expect(v.detail).toBe('4/5 Deployment meet the condition (all must); not: shop/c');
  });

  it('reads unknown when the apiserver does not serve the kind, and when it cannot be watched', async () => {
    tester();
    const run = t.start(probe, { apiVersion: 'apps/v1', kind: 'Deploymnt', condition: 'true' });
    const r = await run.until((x) => x.status === 'unknown' && x.detail.includes('no kind'));
    expect(r.detail).toBe('"apps/v1" has no kind "Deploymnt" (it serves: Deployment)');
    t.api.put(SHOP, deployment('a', 1, 1));
    const seen = t.start(probe, { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', condition: 'true' });
    await seen.until((x) => x.status === 'ok');
    t.api.mode = 'down';
    await seen.until((x) => x.status === 'unknown', 30_000);
  });

  it('type-checks conditions and says where in the expression the problem is', () => {
    expect(celProblem(condition)).toBeUndefined();
    expect(celProblem('has(object.status.readyReplicas) && object.status.readyReplicas > 0')).toBeUndefined();
    expect(celProblem('object.status.x >= ')).toEqual({ message: 'CEL: Unexpected token: EOF', offset: 19 });
    expect(celProblem('objet.status.x > 1')).toMatchObject({ message: 'CEL: Unknown variable: objet', offset: 0 });
    expect(celProblem('1 + 2')).toEqual({ message: 'CEL: the condition must be true or false (it gives int)', offset: 0 });
  });
});
