import assert from 'node:assert/strict';
import { describe, expect, it } from 'vitest';
import type { RequestOptions } from '../kube/http.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess, RawResponse } from '../kube/types.js';
import { actionTester } from '../testing/action-tester.js';
import { FakeClock } from '../testing/fake-clock.js';
import { controlPlaneInventory } from '../testing/inventories.js';
import action from './shed-apiserver-load.js';
import { busiest, type FlowSchema, type Subject } from './parts/flow-control.js';

const FC = '/apis/flowcontrol.apiserver.k8s.io/v1';
const group = (name: string): Subject => ({ kind: 'Group', group: { name } });
const user = (name: string): Subject => ({ kind: 'User', user: { name } });
const fs = (name: string, level: string, precedence: number, ...subjects: Subject[]): FlowSchema => ({
  metadata: { name },
  spec: {
    priorityLevelConfiguration: { name: level },
    matchingPrecedence: precedence,
    distinguisherMethod: { type: 'ByUser' },
    rules: [{ subjects, resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], clusterScope: true, namespaces: ['*'] }] }],
  } as unknown as FlowSchema['spec'],
});

/** The stock FlowSchemas of 1.37 (pkg/apis/flowcontrol/bootstrap), subjects as there. */
const STOCK: FlowSchema[] = [
  fs('exempt', 'exempt', 1, group('system:masters')),
  fs('probes', 'exempt', 2, group('system:authenticated'), group('system:unauthenticated')),
  fs('system-leader-election', 'leader-election', 100, user('system:kube-controller-manager'), user('system:kube-scheduler')),
  fs('system-node-high', 'node-high', 400, group('system:nodes')),
  fs('system-nodes', 'system', 500, group('system:nodes')),
  fs('kube-controller-manager', 'workload-high', 800, user('system:kube-controller-manager')),
  fs('kube-scheduler', 'workload-high', 800, user('system:kube-scheduler')),
  fs('kube-system-service-accounts', 'workload-high', 900, group('system:serviceaccounts:kube-system')),
  fs('service-accounts', 'workload-low', 9000, group('system:serviceaccounts')),
  fs('global-default', 'global-default', 9900, group('system:authenticated'), group('system:unauthenticated')),
  fs('catch-all', 'catch-all', 10000, group('system:authenticated'), group('system:unauthenticated')),
];

const dispatched = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([f, n]) => `apiserver_flowcontrol_dispatched_requests_total{flow_schema="${f}",priority_level="x"} ${n}`)
    .join('\n');

/** A clock whose sleeps pass at once (the window between two readings of /metrics). */
function hurriedClock(): FakeClock {
  const clock = new FakeClock();
  const sleep = clock.sleep.bind(clock);
  clock.sleep = (ms, signal) => {
    const p = sleep(ms, signal);
    void clock.advance(ms);
    return p;
  };
  return clock;
}

interface Call {
  method: string;
  path: string;
  body?: unknown;
}

/**
 * An apiserver holding FlowSchemas and priority levels, and answering /metrics with each text in turn (the last again):
 * preflight reads it once, prepare before and after its window.
 */
function fakeApi(schemas: FlowSchema[] = STOCK, metrics: string[] = ['']) {
  const calls: Call[] = [];
  const objects = new Map<string, unknown>();
  let scrape = 0;
  const kube: Partial<KubeAccess> = {
    async raw(path: string): Promise<RawResponse> {
      calls.push({ method: 'GET', path });
      if (path === '/metrics') return { status: 200, body: metrics[Math.min(scrape++, metrics.length - 1)]! };
      return { status: 404, body: '' };
    },
    async json<T>(path: string, o: RequestOptions = {}): Promise<T> {
      const method = o.method ?? 'GET';
      calls.push({ method, path, body: o.body });
      if (method === 'GET' && path === `${FC}/flowschemas`) return { items: schemas } as T;
      if (method === 'POST') {
        const key = `${path}/${(o.body as FlowSchema).metadata.name}`;
        if (objects.has(key)) throw new ApiStatusError(409, 'exists');
        objects.set(key, o.body);
        return o.body as T;
      }
      if (method === 'DELETE') {
        if (!objects.delete(path)) throw new ApiStatusError(404, 'not found');
        return {} as T;
      }
      throw new ApiStatusError(404, 'not found');
    },
  };
  return { kube, calls, objects };
}

const writes = (calls: Call[]) => calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.path.replace(FC, '')}`);

const named = fakeApi();
const fromMetrics = fakeApi(STOCK, [
  '',
  dispatched({ 'service-accounts': 100, 'global-default': 50, 'kube-controller-manager': 10, 'system-node-high': 10 }),
  // over the window: the controller-manager and the kubelets sent the most, but their levels are protected
  dispatched({ 'service-accounts': 700, 'global-default': 60, 'kube-controller-manager': 5000, 'system-node-high': 9000 }),
]);

actionTester(action, {
  inventory: controlPlaneInventory('lab'),
  valid: [
    {
      name: 'named ServiceAccount: a low level and a FlowSchema matched after every protected one; revert deletes both',
      params: { subjects: [{ serviceAccount: 'kr-load/noisy' }], verbs: ['get', 'list'], resources: ['pods'] },
      kube: named.kube,
      runId: 'run-0042',
      check(r) {
        const [schema] = r.prepared.schemas as unknown as FlowSchema[];
        const level = r.prepared.level as { metadata: { name: string; labels: Record<string, string> }; spec: unknown };
        assert.match(level.metadata.name, /^kube-runbook-shed-run-0042-/);
        assert.deepEqual(level.metadata.labels, { 'app.kubernetes.io/managed-by': 'kube-runbook', 'kube-runbook/run': 'run-0042' });
        assert.deepEqual(level.spec, {
          type: 'Limited',
          limited: {
            nominalConcurrencyShares: 1,
            lendablePercent: 0,
            borrowingLimitPercent: 0,
            limitResponse: { type: 'Queue', queuing: { queues: 1, handSize: 1, queueLengthLimit: 10 } },
          },
        });
        assert.equal(schema!.metadata.name, `${level.metadata.name}-1`);
        assert.equal(schema!.spec.priorityLevelConfiguration.name, level.metadata.name);
        // kube-system-service-accounts (workload-high) is the last protected one, at 900
        assert.equal(schema!.spec.matchingPrecedence, 901);
        assert.deepEqual(schema!.spec.rules, [
          {
            subjects: [{ kind: 'ServiceAccount', serviceAccount: { namespace: 'kr-load', name: 'noisy' } }],
            resourceRules: [{ verbs: ['get', 'list'], apiGroups: ['*'], resources: ['pods'], clusterScope: true, namespaces: ['*'] }],
          },
        ]);
        const name = level.metadata.name;
        // created level first (a FlowSchema naming a missing level would be refused its dangling reference), deleted last;
        // the second revert, from the journal's state, finds nothing left
        assert.deepEqual(writes(named.calls), [
          'POST /prioritylevelconfigurations',
          'POST /flowschemas',
          `DELETE /flowschemas/${name}-1`,
          `DELETE /prioritylevelconfigurations/${name}`,
          `DELETE /flowschemas/${name}-1`,
          `DELETE /prioritylevelconfigurations/${name}`,
        ]);
        assert.equal(named.objects.size, 0);
        assert.ok(
          r.ctx.log.lines.some((l) =>
            /will create the priority level .* matchingPrecedence 901 for serviceaccount kr-load\/noisy/.test(l.msg),
          ),
        );
      },
    },
    {
      name: 'top 1 from /metrics: the busiest FlowSchema outside the protected levels, copied one precedence lower',
      params: { top: 1, window: '5s', shares: 2, queueLength: 5 },
      kube: fromMetrics.kube,
      clock: hurriedClock(),
      check(r) {
        const [schema] = r.prepared.schemas as unknown as FlowSchema[];
        assert.equal(r.prepared.schemas.length, 1);
        assert.equal(schema!.spec.matchingPrecedence, 8999);
        assert.deepEqual(schema!.spec.rules, STOCK.find((f) => f.metadata.name === 'service-accounts')!.spec.rules);
        assert.deepEqual(schema!.spec.distinguisherMethod, { type: 'ByUser' });
        assert.deepEqual(r.prepared.shed, ['the FlowSchema service-accounts (workload-low)']);
        assert.ok(r.ctx.log.lines.some((l) => l.msg.includes('service-accounts served 600 requests over 5s')));
        assert.equal(fromMetrics.objects.size, 0);
      },
    },
    {
      name: 'a FlowSchema matched before the new one that names the same ServiceAccount: said, as it keeps their requests',
      params: { subjects: [{ serviceAccount: 'kr-load/noisy' }] },
      kube: fakeApi([
        ...STOCK,
        fs('noisy-first', 'workload-low', 500, { kind: 'ServiceAccount', serviceAccount: { namespace: 'kr-load', name: 'noisy' } }),
      ]).kube,
      check(r) {
        assert.deepEqual(
          r.ctx.log.lines.filter((l) => l.level === 'warn').map((l) => l.msg),
          [
            'shed-apiserver-load: the FlowSchema noisy-first (matchingPrecedence 500) is matched before 901 and names serviceaccount kr-load/noisy: ' +
              'what it matches is not shed (top: 1 sheds by copying it instead)',
          ],
        );
      },
    },
  ],
  invalid: [
    {
      name: 'system:masters is refused where it is written',
      params: { subjects: [{ group: 'system:masters' }] },
      phase: 'params',
      message: /never shed group system:masters: system:masters is exempt/,
    },
    {
      name: "a kubelet's user is refused: its Lease renewals are its node's heartbeat",
      params: { subjects: [{ serviceAccount: 'default/web' }, { user: 'system:node:node-1' }] },
      phase: 'params',
      message: /system:node:node-1 is a kubelet/,
    },
    {
      name: "the controller-manager's leader election is refused",
      params: { subjects: [{ user: 'system:kube-controller-manager' }] },
      phase: 'params',
      message: /leader election/,
    },
    {
      name: "a subject a cluster's own FlowSchema puts in node-high is refused",
      params: { subjects: [{ serviceAccount: 'infra/node-agent' }] },
      kube: fakeApi([
        ...STOCK,
        fs('node-agents', 'node-high', 450, { kind: 'ServiceAccount', serviceAccount: { namespace: 'infra', name: 'node-agent' } }),
      ]).kube,
      phase: 'preflight',
      message: /classified by the FlowSchema node-agents into the protected level node-high/,
    },
    {
      name: 'only protected levels were busy: nothing to shed',
      params: { top: 2 },
      kube: fakeApi(STOCK, ['', dispatched({ 'system-node-high': 1 }), dispatched({ 'system-node-high': 900, exempt: 50 })]).kube,
      clock: hurriedClock(),
      phase: 'prepare',
      code: 'SHED_NOTHING',
    },
    {
      name: 'a precedence taken by another FlowSchema just before the busiest one',
      params: { top: 1 },
      kube: fakeApi(
        [...STOCK, fs('tenant-a', 'workload-low', 8999, group('tenant-a'))],
        ['', dispatched({}), dispatched({ 'service-accounts': 80 })],
      ).kube,
      clock: hurriedClock(),
      phase: 'prepare',
      code: 'SHED_PRECEDENCE_TAKEN',
    },
    { name: 'subjects and top together', params: { subjects: [{ user: 'alice' }], top: 1 }, phase: 'params' },
    { name: 'neither subjects nor top', params: {}, phase: 'params' },
    { name: 'a ServiceAccount without its namespace', params: { subjects: [{ serviceAccount: 'noisy' }] }, phase: 'params' },
    { name: 'verbs with top', params: { top: 1, verbs: ['get'] }, phase: 'params', message: /verbs narrows subjects/ },
  ],
});

describe('busiest', () => {
  it('counts the requests between two readings and those queued, and a counter reset afresh', () => {
    const before = dispatched({ a: 100, b: 500 });
    const after = `${dispatched({ a: 130, b: 20 })}\napiserver_flowcontrol_current_inqueue_requests{flow_schema="a",priority_level="x"} 4`;
    expect(busiest(before, after)).toEqual([
      { name: 'a', requests: 34 },
      { name: 'b', requests: 20 },
    ]);
  });
});
