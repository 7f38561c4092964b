import { describe, expect, it } from 'vitest';
import action from './load-apiserver.js';
import type { ActionCtx } from '../contract/context.js';
import type { RequestOptions } from '../kube/http.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess, RawResponse } from '../kube/types.js';
import { memoryLogger } from '../core/logger.js';
import { isKrError, type KrError } from '../core/errors.js';
import { RunTasks } from '../engine/tasks.js';
import { actionTester, runLifecycle } from '../testing/action-tester.js';
import { type ExecCall, FakeNodes } from '../testing/fake-nodes.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { baseRunbook, startTestRun, testInventory } from '../testing/engine-harness.js';
import { parseInventoryLoosely } from '../testing/loose-inventory.js';
import { FakeClock } from '../testing/fake-clock.js';
import { controlPlaneInventory, scriptPurpose } from '../testing/inventories.js';
import { accessChecks, describeCheck, resolveAccess } from '../contract/access.js';
import { describeRules, runIdentity } from './parts/load-identity.js';
import { dangerousGrants, refuseDangerousAccount } from './parts/load-existing.js';

interface Call {
  at: number;
  path: string;
  method: string;
  headers: Record<string, string>;
  query?: RequestOptions['query'];
  body?: unknown;
  discardBody?: boolean;
}

const TOKEN = 'kubeconfig-token-that-must-not-leak';
/** What the TokenRequest API answers for the ServiceAccount: the nodes' credential. */
const SA_TOKEN = 'serviceaccount-token-that-must-not-leak';

/** An apiserver answering on the fake clock after `delayMs` (0 at first, set once the load runs), with `status` per call (200, and 404 for a missing kr-load). */
function fakeApi(clock: FakeClock, o: { status?: (c: Call) => number | undefined; allowed?: (c: Call) => boolean } = {}) {
  const calls: Call[] = [];
  let namespace = false;
  let inFlight = 0;
  let maxInFlight = 0;
  const record = (path: string, opts: RequestOptions = {}): Call => {
    const c = {
      at: clock.now(),
      path,
      method: opts.method ?? 'GET',
      headers: opts.headers ?? {},
      query: opts.query,
      body: opts.body,
      discardBody: opts.discardBody,
    };
    calls.push(c);
    return c;
  };
  const answer = (c: Call): number => {
    const s = o.status?.(c);
    if (s !== undefined) return s;
    if (c.path === '/api/v1/namespaces/kr-load' && c.method === 'GET') return namespace ? 200 : 404;
    if (c.path === '/api/v1/namespaces' && c.method === 'POST') namespace = true;
    return c.method === 'POST' ? 201 : 200;
  };
  const kube: Partial<KubeAccess> = {
    contextName: 'fake',
    server: 'https://fake.invalid:6443',
    config: {
      contextName: 'fake',
      server: 'https://fake.invalid:6443',
      credentials: async () => ({
        headers: { Authorization: `Bearer ${TOKEN}` },
        ca: Buffer.from('-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n'),
        insecure: false,
      }),
    },
    async request(path, opts): Promise<RawResponse> {
      const c = record(path, opts);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        if (api.delayMs) await clock.sleep(api.delayMs, opts?.signal);
        // a SelfSubjectAccessReview: allowed, unless the test says otherwise
        if (path.endsWith('/selfsubjectaccessreviews'))
          return { status: 201, body: JSON.stringify({ status: { allowed: o.allowed?.(c) ?? true } }) };
        return { status: answer(c), body: '{}' };
      } finally {
        inFlight--;
      }
    },
    async json<T>(path: string, opts?: RequestOptions): Promise<T> {
      const status = answer(record(path, opts));
      if (status > 299) throw new ApiStatusError(status, `HTTP ${status}`);
      if (path.endsWith('/token')) return { status: { token: SA_TOKEN } } as T;
      // what the apiserver answers a write: the object, with a uid of its own
      return { metadata: { name: path.split('/').pop(), uid: `uid-of-${path}` } } as T;
    },
  };
  const api = {
    delayMs: 0,
    kube,
    calls,
    get maxInFlight() {
      return maxInFlight;
    },
    /** The load's own requests (sent as the ServiceAccount) per whole fake second since `from`. */
    perSecond(from: number, seconds: number): number[] {
      const load = calls.filter((c) => c.headers['Impersonate-User']);
      return Array.from({ length: seconds }, (_, i) => load.filter((c) => c.at >= from + i * 1000 && c.at < from + (i + 1) * 1000).length);
    },
  };
  return api;
}

const PARAMS = {
  qps: 50,
  concurrency: 10,
  userAgent: 'kubelet-liveness-like',
  identity: 'existing',
  as: 'team-a/prober',
  requests: [
    { verb: 'list', resource: 'pods', weight: 3 },
    { verb: 'patch', resource: 'configmaps' },
  ],
};

function loadCtx(clock: FakeClock, kube: Partial<KubeAccess>) {
  const log = memoryLogger();
  const tasks = new RunTasks(log);
  const ctx = { runId: 'run-0001', clock, log, signal: new AbortController().signal, dryRun: false, kube, tasks } as unknown as ActionCtx;
  return { ctx, log, tasks };
}

async function applied(ctx: ActionCtx, params: unknown) {
  const state = await action.prepare(ctx, action.meta.params.parse(params));
  return action.apply(ctx, state);
}

describe('load-apiserver pacing', () => {
  it('starts qps requests in every fake second, mixed by weight', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, PARAMS);
    const t0 = clock.now();
    await clock.advance(5000);
    expect(api.perSecond(t0, 5).slice(1)).toEqual([50, 50, 50, 50]);
    const second = api.calls.filter((c) => c.headers['Impersonate-User'] && c.at >= t0 + 1000 && c.at < t0 + 2000);
    // weights 3 and 1, spread evenly (list, list, patch, list, …): of the 51st to the 100th request, 37 and 13
    expect(second.filter((c) => c.method === 'GET' && c.path === '/api/v1/pods')).toHaveLength(37);
    expect(
      second.filter((c) => c.method === 'PATCH' && c.path === `/api/v1/namespaces/kr-load/configmaps/${state.own.configmaps}`),
    ).toHaveLength(13);
    await action.revert(ctx, state);
  });

  it('keeps at most `concurrency` unanswered: slow answers slow the load down instead', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, { ...PARAMS, qps: 100, concurrency: 5 });
    api.delayMs = 500;
    const t0 = clock.now();
    await clock.advance(4000);
    expect(api.maxInFlight).toBe(5);
    // five at once, each answered after 500 ms: ten a second, not a hundred
    expect(api.perSecond(t0, 4).slice(1)).toEqual([10, 10, 10]);
    await action.revert(ctx, state);
  });
});

describe('load-apiserver stops', () => {
  it('on revert: no request after it, and the objects it wrote are deleted', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx, tasks } = loadCtx(clock, api.kube);
    const state = await applied(ctx, PARAMS);
    api.delayMs = 50;
    await clock.advance(2000);
    expect(tasks.keys).toEqual([state.key]);
    await action.revert(ctx, state);
    expect(tasks.keys).toEqual([]);
    const sent = api.calls.length;
    await clock.advance(5000);
    expect(api.calls.length).toBe(sent);
    expect(api.calls.filter((c) => c.method === 'DELETE').map((c) => c.path)).toEqual([
      `/api/v1/namespaces/kr-load/configmaps/${state.own.configmaps}`,
    ]);
  });

  it('when the run stops (its tasks stopped), with requests in flight cancelled; a revert after that still cleans up', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx, tasks } = loadCtx(clock, api.kube);
    const state = await applied(ctx, { ...PARAMS, qps: 10, concurrency: 3 });
    api.delayMs = 5000;
    await clock.advance(1000);
    await tasks.stopAll();
    const sent = api.calls.length;
    await clock.advance(10_000);
    expect(api.calls.length).toBe(sent);
    expect(clock.pending).toBe(0);
    await action.revert(ctx, state);
    expect(api.calls.filter((c) => c.method === 'DELETE')).toHaveLength(1);
  });

  it('in a process that did not start it (recover): the revert only deletes the objects', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, PARAMS);
    const other = loadCtx(clock, api.kube);
    await action.revert(other.ctx, JSON.parse(JSON.stringify(state)) as typeof state);
    expect(api.calls.filter((c) => c.method === 'DELETE')).toHaveLength(1);
    await action.revert(ctx, state);
  });
});

describe('load-apiserver identity', () => {
  it('sends the load as the ServiceAccount with its User-Agent; its own setup and cleanup as the executor; no credential in logs or state', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx, log } = loadCtx(clock, api.kube);
    const state = await applied(ctx, PARAMS);
    await clock.advance(1000);
    await action.revert(ctx, state);
    const load = api.calls.filter((c) => c.headers['Impersonate-User']);
    expect(load.length).toBeGreaterThan(40);
    for (const c of load)
      expect(c.headers).toEqual({ 'Impersonate-User': 'system:serviceaccount:team-a:prober', 'User-Agent': 'kubelet-liveness-like' });
    // only the status is read of the load's answers: none is kept
    expect(load.every((c) => c.discardBody === true)).toBe(true);
    const setup = api.calls.filter((c) => !c.headers['Impersonate-User']);
    expect(setup.map((c) => `${c.method} ${c.path}`)).toEqual([
      'GET /api/v1/namespaces/kr-load',
      'POST /api/v1/namespaces',
      'POST /api/v1/namespaces/kr-load/configmaps',
      `DELETE /api/v1/namespaces/kr-load/configmaps/${state.own.configmaps}`,
    ]);
    const written = JSON.stringify([state, log.lines, action.describe!(action.meta.params.parse(PARAMS))]);
    expect(written).not.toContain(TOKEN);
    expect(written).not.toMatch(/Bearer|Authorization/i);
    expect(log.lines.some((l) => /\d+ requests in .* as team-a\/prober \(2xx \d+\)/.test(l.msg))).toBe(true);
  });

  it('refuses before the load starts when the ServiceAccount may not make a request, and starts nothing', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock, { status: (c) => (c.path === '/api/v1/pods' ? 403 : undefined) });
    const { ctx, tasks } = loadCtx(clock, api.kube);
    const state = await action.prepare(ctx, action.meta.params.parse(PARAMS));
    const e = await action.apply(ctx, state).catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LOAD_REFUSED');
    expect(String((e as Error).message)).toContain('list /api/v1/pods as team-a/prober answered 403');
    expect(tasks.keys).toEqual([]);
  });
});

actionTester(action, {
  inventory: controlPlaneInventory('lab'),
  valid: [
    {
      name: 'reads and writes of its own objects: the plan says what, from where, how it stops',
      params: PARAMS,
      kube: fakeApi(new FakeClock()).kube,
      check: ({ applied, nodeSideRevert }) => {
        expect(nodeSideRevert).toBeUndefined();
        expect(applied.own).toEqual({ configmaps: expect.stringMatching(/^load-run-0001-/) });
        expect(action.describe!(action.meta.params.parse(PARAMS))).toBe(
          '50 requests/s (at most 10 at once) from the executor as team-a/prober (User-Agent "kubelet-liveness-like"): ' +
            '75% list pods, 25% patch its own configmaps in kr-load; stops on revert, when the run stops, and with the executor process',
        );
      },
    },
  ],
  invalid: [
    { name: 'qps above 2000', phase: 'params', params: { ...PARAMS, qps: 5000 }, message: /<=2000[\s\S]*qps/ },
    { name: 'concurrency 0', phase: 'params', params: { ...PARAMS, concurrency: 0 }, message: /concurrency/ },
    {
      name: 'an existing identity not named',
      phase: 'params',
      params: { ...PARAMS, as: undefined },
      message: /identity existing needs as/,
    },
    {
      name: 'an existing ServiceAccount without saying so',
      phase: 'params',
      params: { ...PARAMS, identity: undefined },
      code: 'INVALID_PARAMS',
      message: /as impersonates an existing ServiceAccount: add identity: existing/,
    },
    {
      name: "kube-system's ServiceAccounts (one may escalate ClusterRoles)",
      phase: 'params',
      params: { ...PARAMS, as: 'kube-system/clusterrole-aggregation-controller' },
      code: 'INVALID_PARAMS',
      message: /never kube-system's ServiceAccounts/,
    },
    {
      name: 'an existing ServiceAccount bound to a role that may escalate',
      phase: 'preflight',
      params: PARAMS,
      kube: rbacApi({
        clusterrolebindings: [
          {
            metadata: { name: 'prober-admin' },
            roleRef: { kind: 'ClusterRole', name: 'grower' },
            subjects: [{ kind: 'Group', name: 'system:serviceaccounts:team-a' }],
          },
        ],
        clusterroles: [{ metadata: { name: 'grower' }, rules: [{ verbs: ['escalate'], resources: ['clusterroles'] }] }],
      }),
      code: 'LOAD_IDENTITY_UNSAFE',
      message:
        /ClusterRoleBinding prober-admin gives group system:serviceaccounts:team-a the ClusterRole grower: verb escalate on clusterroles/,
    },
    { name: 'a ServiceAccount without namespace', phase: 'params', params: { ...PARAMS, as: 'prober' }, message: /namespace\/name/ },
    {
      name: "a write to a user's object",
      phase: 'params',
      params: { ...PARAMS, requests: [{ verb: 'patch', resource: 'configmaps', namespace: 'kube-system', name: 'kubeadm-config' }] },
      message: /its own objects are in kr-load[\s\S]*leave name out/,
    },
    {
      name: 'a write to Nodes',
      phase: 'params',
      params: { ...PARAMS, requests: [{ verb: 'update', resource: 'nodes/status' }] },
      message: /writes only its own configmaps or leases/,
    },
    {
      name: 'a get without a name',
      phase: 'params',
      params: { ...PARAMS, requests: [{ verb: 'get', resource: 'pods' }] },
      message: /needs the name/,
    },
    { name: 'a user agent with a newline', phase: 'params', params: { ...PARAMS, userAgent: 'a\nX-Evil: 1' }, message: /printable ASCII/ },
    { name: 'from somewhere else', phase: 'params', params: { ...PARAMS, from: 'pods' }, message: /executor[\s\S]*nodes/ },
    {
      name: 'from nodes, concurrency below one request at once per node',
      phase: 'preflight',
      params: { ...PARAMS, from: 'nodes', concurrency: 2 },
      selection: ['cp-1', 'node-1', 'node-2'],
      code: 'LOAD_TOO_NARROW',
      message: /concurrency 2 is split across 3 nodes[\s\S]*raise concurrency to 3/,
    },
    {
      name: 'from nodes, a node without a curl that paces',
      phase: 'preflight',
      params: { ...PARAMS, from: 'nodes' },
      kube: fakeApi(new FakeClock()).kube,
      handler: (c) =>
        scriptPurpose(c.script).endsWith('check') ? { code: 1, stdout: '', stderr: 'curl is older than 7.84 (no --rate)' } : OK,
      message: /cannot send the load on cp-1 \(exit 1\): curl is older than 7.84/,
    },
    {
      name: 'from nodes, the node cannot start it',
      phase: 'apply',
      params: { ...PARAMS, from: 'nodes' },
      kube: fakeApi(new FakeClock()).kube,
      handler: (c) => (scriptPurpose(c.script).endsWith('start') ? { code: 1, stdout: '', stderr: 'the load did not start' } : OK),
      code: 'LOAD_START_FAILED',
      message: /on cp-1 \(exit 1\)/,
    },
  ],
  hostile: (value) => ({
    name: 'hostile user agent, from nodes',
    params: { ...PARAMS, from: 'nodes', userAgent: value },
    kube: fakeApi(new FakeClock()).kube,
    handler: nodeAnswers,
  }),
});

const OK = { code: 0, stdout: '', stderr: '' };

/** The node's side: the load starts, and its stop says what curl got. */
function nodeAnswers(c: ExecCall) {
  const purpose = scriptPurpose(c.script);
  if (purpose.endsWith('start')) return { code: 0, stdout: 'started 4242\n', stderr: '' };
  if (purpose.endsWith('stop')) return { code: 0, stdout: 'answers 200=57 429=3\n', stderr: '' };
  return OK;
}

describe('load-apiserver from: nodes', () => {
  const params = { ...PARAMS, from: 'nodes', qps: 60, concurrency: 10 };
  const scenario = (clock = new FakeClock()) => ({
    name: 'from nodes',
    params,
    selection: ['cp-1', 'node-1', 'node-2'],
    kube: fakeApi(clock).kube,
    clock,
    handler: nodeAnswers,
    faultTtlMs: 45_000,
  });

  it("checks the node, then starts its share as the ServiceAccount's token, which travels on the input only", async () => {
    const r = await runLifecycle(action, controlPlaneInventory('lab'), scenario());
    const purposes = r.scripts.map((c) => `${c.phase} ${scriptPurpose(c.script)}`);
    expect(purposes).toEqual([
      'preflight # kube-runbook: load-apiserver check',
      'apply # kube-runbook: load-apiserver start',
      'revert # kube-runbook: load-apiserver stop',
      'revert-again # kube-runbook: load-apiserver stop',
    ]);
    const start = r.scripts.find((c) => c.phase === 'apply')!;
    expect(start.options.input).toBe(`Authorization: Bearer ${SA_TOKEN}\n`);
    // the node's share: 60 qps and 10 at once over 3 nodes is 20 qps from 3 curl processes (6.67/s, 24000 an hour, each)
    expect(start.script).toMatch(/^n='?3'?$/m);
    expect(start.script).toMatch(/^rate='?24000\/h'?$/m);
    expect(start.script).toMatch(/^secs='?45'?$/m);
    expect(start.script).toContain('user-agent = "kubelet-liveness-like"');
    expect(r.applied).toMatchObject({ node: 'cp-1', qps: 20, concurrency: 3, seconds: 45 });
    expect(r.applied.dir).toMatch(/^\/var\/lib\/kube-runbook\/load\/run-0001\/load-run-0001-[a-z0-9]+-cp-1$/);
    // the dead-man of this node runs the same stop script as the revert
    expect(r.nodeSideRevert).toBe(r.scripts.find((c) => c.phase === 'revert')!.script);
    expect(r.nodeSideRevert).toContain(r.applied.dir as string);
    const everything = [...r.scripts.map((c) => c.script), JSON.stringify(r.applied), r.ctx.log.lines.map((l) => l.msg).join('\n')].join(
      '\n',
    );
    for (const secret of [SA_TOKEN, TOKEN]) expect(everything).not.toContain(secret);
    expect(r.ctx.log.lines.map((l) => l.msg).join('\n')).toContain('cp-1 got 200: 57 429: 3');
  });

  it("ends by itself faultTtl after the run's latest end, not faultTtl after it starts", async () => {
    const clock = new FakeClock();
    // a run with 9 minutes left of its maxDuration: the load may last them, then its dead-man's 45 s
    const r = await runLifecycle(action, controlPlaneInventory('lab'), { ...scenario(clock), runEndsBy: clock.now() + 9 * 60_000 });
    expect(r.applied).toMatchObject({ seconds: 9 * 60 + 45 });
    expect(r.scripts.find((c) => c.phase === 'apply')!.script).toMatch(/^secs='?585'?$/m);
  });

  it('asks the TokenRequest API for a token of the ServiceAccount that outlives the fault, and checks each request once first', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    await runLifecycle(action, controlPlaneInventory('lab'), { ...scenario(clock), kube: api.kube, faultTtlMs: 20 * 60_000 });
    const token = api.calls.filter((c) => c.path === '/api/v1/namespaces/team-a/serviceaccounts/prober/token');
    expect(token).toHaveLength(1);
    expect(token[0]!.body).toMatchObject({ kind: 'TokenRequest', spec: { expirationSeconds: 20 * 60 + 60 } });
    // as from the executor: each kind of request once, as the ServiceAccount, before the node starts anything
    expect(api.calls.filter((c) => c.headers['Impersonate-User'] === 'system:serviceaccount:team-a:prober')).toHaveLength(2);
  });

  it('outside a run (no fault ttl to end by) refuses to prepare', async () => {
    const e = await runLifecycle(action, controlPlaneInventory('lab'), { ...scenario(), faultTtlMs: 0 }).catch((x: unknown) => x);
    expect(String(e)).toMatch(/prepare failed: .*only in a run/);
  });
});

describe('load-apiserver from: nodes in a run', () => {
  it("arms each node's dead-man before its load starts, and stops every node's load when the run ends", async () => {
    const clock = new FakeClock();
    const base = fakeKubeAccess(clock, { context: 'lab' });
    const api = fakeApi(clock);
    // the run's own Leases (lock, agents) on the shared fake; the load's requests on the one that answers them
    const kube: KubeAccess = {
      ...base,
      request: api.kube.request!,
      json: <T>(path: string, o?: RequestOptions) => (path.includes('/leases') ? base.json!<T>(path, o) : api.kube.json!<T>(path, o)),
    };
    const inventory = testInventory();
    const nodes = new FakeNodes(parseInventoryLoosely(inventory).spec.nodes, (c) =>
      scriptPurpose(c.script).endsWith('start')
        ? { code: 0, stdout: 'started 4242\n', stderr: '' }
        : { code: 0, stdout: c.script.includes('kube-runbook-ok') ? 'kube-runbook-ok\n' : '', stderr: '' },
    );
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          {
            action: 'load-apiserver',
            // as the language gives it: every default filled in (the harness does not parse `with:`)
            with: { ...action.meta.params.parse({ ...PARAMS, from: 'nodes' }), nodes: { names: ['node-1', 'node-2'] } },
          },
          { wait: '10s' },
        ],
      }),
      actions: [action],
      probes: [],
      kube,
      clock,
      nodes,
      inventory,
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r, JSON.stringify(h.events.filter((e) => e.type === 'run-end' || e.type === 'log'))).toMatchObject({
      status: 'passed',
      remaining: [],
    });
    for (const node of ['node-1', 'node-2']) {
      // the dead-man's arm script writes its watcher and the revert (src/engine/deadman.ts)
      const seen = nodes.scriptsOn(node).map((s) => (s.startsWith('set -eu') && s.includes('watch.sh') ? 'arm' : scriptPurpose(s)));
      const arm = seen.indexOf('arm');
      const start = seen.indexOf('# kube-runbook: load-apiserver start');
      const stop = seen.indexOf('# kube-runbook: load-apiserver stop');
      expect(arm, `${node}: ${seen.join(', ')}`).toBeGreaterThanOrEqual(0);
      expect(start, `${node}: the load starts after its dead-man is armed`).toBeGreaterThan(arm);
      expect(stop, `${node}: the run's end stops it`).toBeGreaterThan(start);
    }
    expect(nodes.scriptsOn('node-3')).toEqual([]);
    // the dead-man's revert is the same stop script
    expect(nodes.scriptsOn('node-1').find((s) => s.includes('watch.sh'))).toContain('# kube-runbook: load-apiserver stop');
  });
});

/** An apiserver whose RBAC lists hold `lists` (by resource), for the checks of an existing ServiceAccount. */
function rbacApi(lists: Record<string, unknown[]>): Partial<KubeAccess> {
  const api = fakeApi(new FakeClock());
  const json = api.kube.json!;
  return {
    ...api.kube,
    json: <T>(path: string, o?: RequestOptions) => {
      const m = /^\/apis\/rbac\.authorization\.k8s\.io\/v1\/([a-z]+)$/.exec(path);
      return m && (o?.method ?? 'GET') === 'GET' ? Promise.resolve({ items: lists[m[1]!] ?? [] } as T) : json<T>(path, o);
    },
  };
}

/** The same load, as the identity the run makes (the default). */
const RUN_PARAMS = { ...PARAMS, identity: undefined, as: undefined };

describe('load-apiserver: the identity the run makes', () => {
  it('is granted exactly the verbs and resources of its requests', () => {
    const p = action.meta.params.parse({
      ...RUN_PARAMS,
      requests: [
        { verb: 'list', resource: 'pods', weight: 3 },
        { verb: 'list', resource: 'leases', namespace: 'kube-node-lease' },
        { verb: 'get', resource: 'nodes/status', name: 'node-1' },
        { verb: 'patch', resource: 'configmaps' },
        { verb: 'create', resource: 'configmaps' },
      ],
    });
    const id = runIdentity(
      p.requests.map((r) => ({ ...r, namespace: r.namespace ?? null, name: r.name ?? null })),
      false,
    );
    expect(id.name).toMatch(/^kube-runbook-load-[0-9a-f]{10}$/);
    expect(id.rules).toEqual({
      cluster: [
        { apiGroups: [''], resources: ['nodes/status'], verbs: ['get'], resourceNames: ['node-1'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
      ],
      namespaced: {
        'kube-node-lease': [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list'] }],
        'kr-load': [{ apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'patch'] }],
      },
    });
    expect(describeRules(id.rules)).toBe(
      'get nodes/status node-1, list pods (cluster-wide), create/patch configmaps in kr-load, list leases.coordination.k8s.io in kube-node-lease',
    );
    // another mix, another identity; the nodes' identity may also delete itself (its dead-man does)
    const other = runIdentity([{ verb: 'list', resource: 'pods', namespace: null, name: null }], false);
    expect(other.name).not.toBe(id.name);
    const nodes = runIdentity([{ verb: 'list', resource: 'pods', namespace: null, name: null }], true);
    expect(nodes.rules.cluster).toContainEqual({
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['delete'],
      resourceNames: [nodes.name],
    });
  });

  it('is created before the load, owned by its ClusterRole, sent as, and removed at revert (ServiceAccount first), twice harmlessly', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, RUN_PARAMS);
    const name = state.identity!.name;
    expect(state.as).toBe(`kr-load/${name}`);
    expect(state.identity).toEqual({ name, namespaces: ['kr-load'], cluster: true, tokenSecret: false });
    const rbac = '/apis/rbac.authorization.k8s.io/v1';
    const writes = api.calls.filter((c) => !c.headers['Impersonate-User'] && c.method === 'POST').map((c) => c.path);
    expect(writes).toEqual([
      '/api/v1/namespaces',
      `${rbac}/clusterroles`,
      '/api/v1/namespaces/kr-load/serviceaccounts',
      `${rbac}/clusterrolebindings`,
      `${rbac}/namespaces/kr-load/roles`,
      `${rbac}/namespaces/kr-load/rolebindings`,
      '/api/v1/namespaces/kr-load/configmaps',
    ]);
    type Written = { metadata: { ownerReferences?: unknown }; subjects?: unknown };
    const body = (path: string) => api.calls.find((c) => c.path === path && c.method === 'POST')!.body as Written;
    expect(body(`${rbac}/clusterroles`)).toMatchObject({ rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] });
    expect(body(`${rbac}/namespaces/kr-load/roles`)).toMatchObject({
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] }],
    });
    for (const p of [
      '/api/v1/namespaces/kr-load/serviceaccounts',
      `${rbac}/clusterrolebindings`,
      `${rbac}/namespaces/kr-load/rolebindings`,
    ])
      expect(body(p).metadata.ownerReferences, p).toEqual([
        { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name, uid: `uid-of-${rbac}/clusterroles` },
      ]);
    expect(body(`${rbac}/clusterrolebindings`).subjects).toEqual([{ kind: 'ServiceAccount', name, namespace: 'kr-load' }]);
    await clock.advance(1000);
    const load = api.calls.filter((c) => c.headers['Impersonate-User']);
    expect(load.length).toBeGreaterThan(40);
    expect(new Set(load.map((c) => c.headers['Impersonate-User']))).toEqual(new Set([`system:serviceaccount:kr-load:${name}`]));
    await action.revert(ctx, state);
    const deletes = () => api.calls.filter((c) => c.method === 'DELETE').map((c) => c.path);
    expect(deletes()).toEqual([
      `/api/v1/namespaces/kr-load/configmaps/${state.own.configmaps}`,
      `/api/v1/namespaces/kr-load/serviceaccounts/${name}`,
      `${rbac}/clusterrolebindings/${name}`,
      `${rbac}/namespaces/kr-load/rolebindings/${name}`,
      `${rbac}/namespaces/kr-load/roles/${name}`,
      `${rbac}/clusterroles/${name}`,
    ]);
    // rebuilt from the journal in a new process, where all is gone already: nothing fails
    const gone = fakeApi(clock, { status: (c) => (c.method === 'DELETE' ? 404 : undefined) });
    await action.revert(loadCtx(clock, gone.kube).ctx, JSON.parse(JSON.stringify(state)) as typeof state);
    expect(gone.calls.filter((c) => c.method === 'DELETE')).toHaveLength(6);
  });

  it('writes over objects of its name a killed run left, and sends no request of the load before the apiserver grants it', async () => {
    const clock = new FakeClock();
    let reviews = 0;
    let refused = 0;
    const api = fakeApi(clock, {
      status: (c) => {
        if (c.method === 'POST' && c.path.includes('rbac')) return 409;
        // another apiserver has not seen the new Role for the first check
        if (c.headers['Impersonate-User'] && !c.path.endsWith('/selfsubjectaccessreviews') && refused < 1) return (refused++, 403);
        return undefined;
      },
      // the authorizer takes the new Role in after three reviews
      allowed: () => ++reviews > 3,
    });
    const { ctx } = loadCtx(clock, api.kube);
    const applying = applied(ctx, RUN_PARAMS);
    await clock.advance(2000);
    const state = await applying;
    expect(api.calls.filter((c) => c.method === 'PUT' && c.path.includes('rbac')).map((c) => c.path.split('/').slice(-2)[0])).toEqual([
      'clusterroles',
      'clusterrolebindings',
      'roles',
      'rolebindings',
    ]);
    const asIdentity = api.calls.filter((c) => c.headers['Impersonate-User']);
    const firstLoad = asIdentity.findIndex((c) => !c.path.endsWith('/selfsubjectaccessreviews'));
    // four reviews of the first request (three refused), one of the second, then the load's own requests
    expect(
      asIdentity.slice(0, firstLoad).map((c) => (c.body as { spec: { resourceAttributes: unknown } }).spec.resourceAttributes),
    ).toEqual([
      ...Array.from({ length: 4 }, () => ({ verb: 'list', group: '', resource: 'pods' })),
      { verb: 'patch', group: '', resource: 'configmaps', namespace: 'kr-load', name: state.own.configmaps },
    ]);
    expect(refused).toBe(1);
    await action.revert(ctx, state);
  });

  it('says what is left and how to remove it when the revert cannot remove it', async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock, { status: (c) => (c.method === 'DELETE' && c.path.includes('/roles/') ? 403 : undefined) });
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, RUN_PARAMS);
    const e = await action.revert(ctx, state).catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LOAD_IDENTITY_LEFT');
    expect(String((e as Error).message)).toContain(`/namespaces/kr-load/roles/${state.identity!.name}: HTTP 403`);
    expect(String((e as Error).message)).toContain(`kubectl delete clusterrole ${state.identity!.name}`);
    expect((e as KrError).transient, 'a refusal is not tried again').toBeUndefined();
  });

  it('is created again while a struggling apiserver answers 503, and not after a refusal', async () => {
    const clock = new FakeClock();
    let unavailable = 3;
    const api = fakeApi(clock, {
      status: (c) => (c.method === 'POST' && c.path.endsWith('/clusterroles') && unavailable-- > 0 ? 503 : undefined),
    });
    const { ctx } = loadCtx(clock, api.kube);
    const done = applied(ctx, RUN_PARAMS);
    expect(await clock.runUntil(() => api.calls.filter((c) => c.path.endsWith('/clusterroles')).length >= 4, 60_000)).toBe(true);
    const state = await done;
    expect(state.identity).toBeDefined();
    await action.revert(ctx, state);
    // a refusal is final: one attempt, the step fails
    const refused = fakeApi(clock, { status: (c) => (c.method === 'POST' && c.path.endsWith('/clusterroles') ? 403 : undefined) });
    const e = await applied(loadCtx(clock, refused.kube).ctx, RUN_PARAMS).catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LOAD_IDENTITY');
    expect(refused.calls.filter((c) => c.method === 'POST' && c.path.endsWith('/clusterroles'))).toHaveLength(1);
  });

  it('leaves the revert to be tried again while the apiserver cannot answer, and says so only when it refuses', async () => {
    const clock = new FakeClock();
    let down = true;
    const api = fakeApi(clock, {
      status: (c) => (down && c.method === 'DELETE' && c.path.includes('/serviceaccounts/') ? 503 : undefined),
    });
    const { ctx } = loadCtx(clock, api.kube);
    const state = await applied(ctx, RUN_PARAMS);
    const e = await action.revert(ctx, state).catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LOAD_IDENTITY_LEFT');
    expect((e as KrError).transient, 'the engine reverts it again until the rollback deadline').toBe('apiserver 503');
    down = false;
    await action.revert(ctx, state);
  });

  it('is what the executor must be granted: its objects by name, the rights it passes on, and impersonation of it alone', () => {
    const params = action.meta.params.parse(RUN_PARAMS) as Record<string, unknown>;
    const name = runIdentity([...PARAMS.requests.map((r) => ({ ...r, namespace: null, name: null }))] as never, false).name;
    const checks = accessChecks(resolveAccess(action.meta.access, params)).map(describeCheck);
    expect(checks).toEqual(
      expect.arrayContaining([
        'create serviceaccounts in kr-load',
        `impersonate serviceaccounts ${name} in kr-load`,
        `delete serviceaccounts ${name} in kr-load`,
        'create clusterroles.rbac.authorization.k8s.io (cluster-wide)',
        `delete clusterroles.rbac.authorization.k8s.io ${name} (cluster-wide)`,
        `delete rolebindings.rbac.authorization.k8s.io ${name} in kr-load`,
        'list pods (cluster-wide)',
        'patch configmaps in kr-load',
      ]),
    );
    // impersonation of its own ServiceAccount only, and nothing unnamed but creates and the rights it passes on
    expect(checks.filter((c) => c.startsWith('impersonate'))).toEqual([`impersonate serviceaccounts ${name} in kr-load`]);
    expect(checks.filter((c) => /^(delete|update) /.test(c) && !c.includes(name) && !c.includes('kr-load'))).toEqual([]);
    expect(checks.some((c) => /rolebindings|clusterroles|roles|bind|escalate/.test(c) && /^list/.test(c))).toBe(false);
    const existing = accessChecks(resolveAccess(action.meta.access, action.meta.params.parse(PARAMS) as Record<string, unknown>)).map(
      describeCheck,
    );
    expect(existing.filter((c) => c.startsWith('impersonate'))).toEqual(['impersonate serviceaccounts prober in team-a']);
    expect(existing).toContain('list clusterrolebindings.rbac.authorization.k8s.io (cluster-wide)');
    expect(existing.some((c) => c.startsWith('create clusterroles'))).toBe(false);
  });
});

describe('load-apiserver: an existing ServiceAccount', () => {
  const bind = (kind: string, name: string, role: string, namespace?: string) => ({
    metadata: { name, ...(namespace ? { namespace } : {}) },
    roleRef: { kind: namespace ? 'Role' : 'ClusterRole', name: role },
    subjects: [kind === 'ServiceAccount' ? { kind, name: 'prober', namespace: 'team-a' } : { kind: 'Group', name: kind }],
  });
  const roles = [
    { metadata: { name: 'reader' }, rules: [{ verbs: ['get', 'list'], resources: ['pods'] }] },
    { metadata: { name: 'everything' }, rules: [{ verbs: ['get'], resources: ['*'] }] },
    { metadata: { name: 'binder' }, rules: [{ verbs: ['bind'], resources: ['clusterroles'] }] },
  ];
  const check = (crb: unknown[], rb: unknown[] = [], nsRoles: unknown[] = []) =>
    dangerousGrants('team-a', 'prober', {
      clusterRoleBindings: crb as never,
      roleBindings: rb as never,
      clusterRoles: roles,
      roles: nsRoles as never,
    });

  it('is refused when bound to a role that may grow, by name, through its groups, or by a RoleBinding', () => {
    expect(check([bind('ServiceAccount', 'ok', 'reader')])).toEqual([]);
    expect(check([bind('ServiceAccount', 'all', 'everything')])).toEqual([
      'ClusterRoleBinding all gives it the ClusterRole everything: every resource (*) with get',
    ]);
    expect(check([bind('system:serviceaccounts', 'sas', 'binder')])).toEqual([
      'ClusterRoleBinding sas gives group system:serviceaccounts the ClusterRole binder: verb bind on clusterroles',
    ]);
    const nsRole = { metadata: { name: 'imp', namespace: 'elsewhere' }, rules: [{ verbs: ['impersonate'], resources: ['users'] }] };
    expect(check([], [bind('ServiceAccount', 'rb', 'imp', 'elsewhere')], [nsRole])).toEqual([
      'RoleBinding elsewhere/rb gives it the Role imp: verb impersonate on users',
    ]);
    // another account's binding, or another namespace's group, is not this one's
    expect(check([{ ...bind('system:serviceaccounts:team-b', 'b', 'binder') }])).toEqual([]);
  });

  it('is checked at preflight: a safe one passes', async () => {
    const kube = rbacApi({ clusterrolebindings: [bind('ServiceAccount', 'ok', 'reader')], clusterroles: roles });
    await expect(refuseDangerousAccount(kube as KubeAccess, 'team-a/prober')).resolves.toBeUndefined();
  });
});

describe('load-apiserver from: nodes, as the identity the run makes', () => {
  it("binds the token to the Secret of the identity, which each node's revert removes, and its dead-man too", async () => {
    const clock = new FakeClock();
    const api = fakeApi(clock);
    const scenario = {
      name: 'from nodes, run identity',
      params: { ...RUN_PARAMS, from: 'nodes', qps: 60, concurrency: 10 },
      kube: api.kube,
      clock,
      handler: nodeAnswers,
      faultTtlMs: 45_000,
    };
    const first = await runLifecycle(action, controlPlaneInventory('lab'), { ...scenario, selection: ['cp-1', 'node-1'] });
    const name = (first.applied.identity as { name: string }).name;
    expect(first.applied).toMatchObject({ as: `kr-load/${name}`, identity: { name, tokenSecret: true } });
    const token = api.calls.find((c) => c.path === `/api/v1/namespaces/kr-load/serviceaccounts/${name}/token`)!;
    expect(token.body).toMatchObject({
      spec: {
        expirationSeconds: 600,
        boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name, uid: `uid-of-/api/v1/namespaces/kr-load/secrets` },
      },
    });
    expect(api.calls.filter((c) => c.method === 'DELETE' && c.path.endsWith(`/secrets/${name}`)).length).toBeGreaterThan(0);
    // the dead-man's stop deletes the identity's ClusterRole with the node's token (the revert's leaves it to the executor)
    const start = first.scripts.find((c) => c.phase === 'apply')!.script;
    expect(start).toContain(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
    expect(first.nodeSideRevert).toContain('cleanup.conf');
    expect(first.scripts.find((c) => c.phase === 'revert')!.script).not.toContain('cleanup.conf');
    const other = fakeApi(clock);
    const second = await runLifecycle(action, controlPlaneInventory('lab'), {
      ...scenario,
      kube: other.kube,
      selection: ['node-1', 'cp-1'],
    });
    expect(second.applied).toMatchObject({ identity: { name } });
    expect(other.calls.filter((c) => c.method === 'DELETE' && c.path.endsWith(`/clusterroles/${name}`)).length).toBeGreaterThan(0);
  });
});
