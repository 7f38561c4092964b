import { afterEach, describe, expect, it } from 'vitest';
import { paths } from '../kube/resources.js';
import type { RawObject } from '../kube/source.js';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type EndpointsIncident } from './endpoints-stability.js';

let t: ProbeTester;
afterEach(async () => t.close());

const service = (name: string): RawObject => ({ metadata: { namespace: 'default', name }, spec: { selector: { app: name } } });
const endpointsOf = (name: string, ready: number): RawObject => ({
  metadata: { namespace: 'default', name },
  subsets: ready ? [{ addresses: Array.from({ length: ready }, (_, i) => ({ ip: `10.0.0.${i + 1}` })) }] : [],
});
const slice = (name: string, svc: string, ready: number): RawObject => ({
  metadata: { namespace: 'default', name, labels: { 'kubernetes.io/service-name': svc } },
  endpoints: Array.from({ length: ready }, (_, i) => ({ addresses: [`10.0.1.${i + 1}`], conditions: { ready: true } })),
});
const incidents = (r: { value: unknown }) => (r.value as { incidents: EndpointsIncident[] }).incidents;

function setup() {
  t = new ProbeTester();
  t.putNode('node-1');
  t.api.put(paths.services, service('web'));
  t.api.put(paths.endpoints, endpointsOf('web', 2));
  t.putPod('default', 'web-1', { node: 'node-1', labels: { app: 'web' } });
  t.putPod('default', 'web-2', { node: 'node-1', labels: { app: 'web' } });
}

describe('endpoints-stability', () => {
  it('catches Endpoints deleted while their Service exists with ready pods (incident 2), and their absence', async () => {
    setup();
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.detail).toBe('endpoints of 1 Services stable');
    const deletedAt = t.clock.now();
    t.api.remove(paths.endpoints, 'default/web');
    const v = await run.until((r) => r.status === 'violated');
    expect(v.at).toBe(deletedAt + 5000);
    expect(incidents(v)).toEqual([{ service: 'default/web', at: deletedAt, what: 'deleted', readyPods: 2 }]);
    expect(v.detail).toBe('1 incident: default/web deleted with 2 ready pods; no ready endpoints: default/web for 5s');
    t.api.put(paths.endpoints, endpointsOf('web', 2));
    const after = await run.until((r) => !r.detail.includes('no ready endpoints'));
    expect(after.status).toBe('violated');
  });

  it('does not count endpoints that go with their Service, nor emptied endpoints of pods that are no longer ready', async () => {
    setup();
    t.api.put(paths.services, service('api'));
    t.api.put(paths.endpoints, endpointsOf('api', 1));
    t.putPod('default', 'api-1', { node: 'node-1', labels: { app: 'api' } });
    const run = t.start(probe, {});
    await run.until((r) => r.status === 'ok');
    // web: the Endpoints DELETED event comes before the Service's (separate watches may order them so)
    t.api.remove(paths.endpoints, 'default/web');
    await t.advance(1000);
    t.api.remove(paths.services, 'default/web');
    // api: its pod turns unready, then the endpoints controller empties the Endpoints
    t.putPod('default', 'api-1', { node: 'node-1', labels: { app: 'api' }, ready: false });
    t.api.put(paths.endpoints, endpointsOf('api', 0));
    await t.advance(20_000);
    expect(run.readings.filter((r) => r.status === 'violated')).toEqual([]);
    expect(run.last()?.detail).toBe('endpoints of 1 Services stable');
  });

  it('with EndpointSlices, counts a Service left without any ready slice, not one slice replaced by another', async () => {
    t = new ProbeTester();
    t.kube.rawHandler = (path) => ({ status: path === '/apis/discovery.k8s.io/v1' ? 404 : 200, body: '{}' });
    const slices = paths.endpointSlices('v1beta1');
    t.api.put(paths.services, service('web'));
    t.api.put(slices, slice('web-a', 'web', 1));
    t.api.put(slices, slice('web-b', 'web', 1));
    t.putPod('default', 'web-1', { node: 'node-1', labels: { app: 'web' } });
    const run = t.start(probe, { kind: 'endpointslices', settle: '2s' });
    await run.until((r) => r.status === 'ok');
    t.api.remove(slices, 'default/web-a');
    await t.advance(5000);
    expect(run.last()?.status).toBe('ok');
    t.api.put(slices, slice('web-b', 'web', 0));
    const v = await run.until((r) => r.status === 'violated');
    expect(incidents(v).map((i) => [i.service, i.what])).toEqual([['default/web', 'emptied']]);
  });
});
