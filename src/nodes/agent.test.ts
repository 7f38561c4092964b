import { createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KrError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { FakeAgentApi, FakeStatusError, agentIdentity } from '../testing/fake-agent-api.js';
import { FakeHostFiles } from '../testing/fake-host-files.js';
import { FakeClock } from '../testing/fake-clock.js';
import { AgentTransport } from '../inventory/schema.js';
import { agentTransport } from './agent.js';
import { checkAgentAccess, serveAgent } from './agent-server.js';
import { newAgentKeys, sealInput } from './agent-auth.js';
import { type AgentKeys } from './agent-auth.js';
import { type ConfigMapLite, readRequest, renewalAnnotations, requestObject, resultName, runLeaseName } from './agent-protocol.js';
import type { ExecResult } from './types.js';

const NS = 'kr-agents';
const RUN = '20260101T000000Z-test-ab12';
const config = AgentTransport.parse({ type: 'agent', namespace: NS, image: 'registry.example/agent:1' });
const node1 = { name: 'node-1', roles: ['worker' as const] };

function setup(run: (wired: string, timeoutMs: number) => Promise<ExecResult> = async () => ({ code: 0, stdout: 'ok\n', stderr: '' })) {
  const clock = new FakeClock();
  const api = new FakeAgentApi();
  const ran: { wired: string; timeoutMs: number }[] = [];
  const stop = new AbortController();
  const keys = newAgentKeys();
  const warnings: string[] = [];
  const log = { ...silentLogger, warn: (m: string) => void warnings.push(m) };
  const transport = agentTransport(config, { api, runId: RUN, clock, keys, log });
  // the node's files: what an agent remembers outlives it, as on a host
  const files = new FakeHostFiles();
  const startAgent = (node = 'node-1', o: { faultTtlMs?: number } = {}) =>
    serveAgent(agentIdentity(keys, { node, namespace: NS, runId: RUN, faultTtlMs: o.faultTtlMs ?? 3_600_000 }), {
      api,
      clock,
      log,
      signal: stop.signal,
      run: (wired, timeoutMs) => {
        ran.push({ wired, timeoutMs });
        return run(wired, timeoutMs);
      },
      files,
    });
  return { clock, api, ran, stop, transport, startAgent, keys, warnings, files, log };
}

/** The run Lease renewed at `renewTime` by `holder`, signed as `keys` (the executor's, unless said otherwise) signs it. */
function renewLease(api: FakeAgentApi, keys: Pick<AgentKeys, 'signRenewal'>, renewTime: string, holder = RUN) {
  api.put('leases', NS, {
    metadata: { name: runLeaseName(RUN), annotations: renewalAnnotations(NS, RUN, renewTime, keys) },
    spec: { holderIdentity: holder, renewTime },
  });
}

/** Runs `p` to its end on the fake clock. */
async function settle<T>(clock: FakeClock, p: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const out: { value?: T; error?: unknown; done?: boolean } = {};
  p.then(
    (value) => Object.assign(out, { value, done: true }),
    (error: unknown) => Object.assign(out, { error, done: true }),
  );
  await clock.runUntil(() => out.done === true, 600_000, 50);
  return out;
}

describe('the agent transport', () => {
  it("runs the script through the node's agent and gives back its exit code and output, leaving no object behind", async () => {
    const { clock, api, ran, stop, transport, startAgent } = setup(async () => ({ code: 3, stdout: 'out', stderr: 'err' }));
    const agent = startAgent();
    const r = await settle(clock, transport.exec(node1, 'echo "$x"', { input: "it's", timeoutMs: 5000 }));
    expect(r.value).toEqual({ code: 3, stdout: 'out', stderr: 'err' });
    expect(ran).toHaveLength(1);
    expect(ran[0]!.timeoutMs).toBe(5000);
    // the script and its input travel wired, as over ssh (stdin of `sh -s`)
    expect(ran[0]!.wired).toContain('echo "$x"');
    expect(ran[0]!.wired).toContain(`'it'\\''s'`);
    expect(api.names('configmaps', NS)).toEqual([]);
    stop.abort();
    await settle(clock, agent);
  });

  it('writes requests immutable, labelled for one node of one run, so another node or run never takes them', async () => {
    const { clock, api, ran, stop, transport, startAgent } = setup();
    const other = startAgent('node-2');
    const pending = settle(clock, transport.exec(node1, 'true'));
    await clock.advance(100);
    const [req] = [...api.objects.values()].filter((o) => o.metadata.name.startsWith('kr-exec-'));
    expect(req?.immutable).toBe(true);
    expect(req?.metadata.labels?.['kube-runbook/kind']).toBe('request');
    const r = await pending;
    expect(r.error).toBeInstanceOf(KrError);
    expect(ran).toEqual([]);
    stop.abort();
    await settle(clock, other);
  });

  it('an agent that does not take the script within 15 s makes the node unreachable (transient), and the request is withdrawn', async () => {
    const { clock, api, transport } = setup();
    const t0 = clock.now();
    const r = await settle(clock, transport.exec(node1, 'true'));
    const e = r.error as KrError;
    expect(e.code).toBe('NODE_UNREACHABLE');
    expect(e.transient).toBe('agent silence');
    expect(e.message).toMatch(/its agent \(pod kr-agents\/kr-agent-node-1-[0-9a-f]{8}\) did not take the script within 15s/);
    // its deadline, and the grace a claim made just before it gets to show
    expect(clock.now() - t0).toBeGreaterThanOrEqual(17_000);
    expect(clock.now() - t0).toBeLessThan(18_000);
    expect(api.names('configmaps', NS)).toEqual([]);
  });

  it('an agent never starts a request after its deadline, nor one withdrawn between its list and its claim', async () => {
    const { clock, api, ran, stop, startAgent, keys } = setup();
    const late = requestObject(
      NS,
      RUN,
      { name: 'kr-exec-late', node: 'node-1', wired: 'touch /late', timeoutMs: 1000, deadline: clock.now() - 1 },
      keys.signRequest,
    );
    api.put('configmaps', NS, late as never);
    // a list answered from before the executor withdrew its request
    const withdrawn = requestObject(
      NS,
      RUN,
      { name: 'kr-exec-withdrawn', node: 'node-1', wired: 'touch /withdrawn', timeoutMs: 1000, deadline: clock.now() + 60_000 },
      keys.signRequest,
    );
    const list = api.json.bind(api);
    api.json = async <T>(path: string, o?: Parameters<typeof list>[1]) => {
      const r = await list<T>(path, o);
      if (!path.endsWith('/configmaps') || o?.method) return r;
      return { items: [...(r as { items: unknown[] }).items, structuredClone(withdrawn)] } as T;
    };
    const agent = startAgent();
    await clock.advance(5000);
    expect(ran).toEqual([]);
    expect(api.names('configmaps', NS)).toEqual(['kr-exec-late']); // the claim on the withdrawn one was taken back
    stop.abort();
    await settle(clock, agent);
  });

  it('a script the agent had to kill at its timeout is EXEC_TIMEOUT', async () => {
    const { clock, stop, transport, startAgent } = setup(async () => {
      throw new KrError('EXEC_TIMEOUT', 'killed');
    });
    const agent = startAgent();
    const r = await settle(clock, transport.exec(node1, 'sleep 100', { timeoutMs: 1000 }));
    expect((r.error as KrError).code).toBe('EXEC_TIMEOUT');
    stop.abort();
    await settle(clock, agent);
  });

  it('a refused request names the permission, and it is permanent', async () => {
    const { clock, api, transport } = setup();
    api.json = async () => {
      throw new FakeStatusError(403, 'configmaps is forbidden');
    };
    const r = await settle(clock, transport.exec(node1, 'true'));
    const e = r.error as KrError;
    expect(e.code).toBe('AGENT_FORBIDDEN');
    expect(e.transient).toBeUndefined();
    expect(e.details.join('\n')).toMatch(/create, get and delete on configmaps in kr-agents/);
  });

  it('an apiserver the executor cannot reach is transient', async () => {
    const { clock, api, transport } = setup();
    api.down = true;
    const e = (await settle(clock, transport.exec(node1, 'true'))).error as KrError;
    expect(e.code).toBe('NODE_UNREACHABLE');
    expect(e.transient).toBe('apiserver failure');
  });
});

describe('a request whose write timed out', () => {
  /** The apiserver makes the write, and the answer is lost on the way back. */
  const losingAnswers = (api: FakeAgentApi) => {
    const json = api.json.bind(api);
    api.json = async <T>(path: string, o?: Parameters<typeof json>[1]) => {
      const r = await json<T>(path, o);
      if (
        o?.method === 'POST' &&
        (o.body as ConfigMapLite).metadata.name.startsWith('kr-exec-') &&
        !(o.body as ConfigMapLite).metadata.name.endsWith('-result')
      )
        throw Object.assign(new Error('context deadline exceeded'), { code: 'ETIMEDOUT' });
      return r;
    };
  };

  it('made all the same is followed to its result: the script runs once, and nothing is left', async () => {
    const { clock, api, ran, stop, transport, startAgent } = setup(async () => ({ code: 0, stdout: 'once\n', stderr: '' }));
    losingAnswers(api);
    const agent = startAgent();
    const r = await settle(clock, transport.exec(node1, 'true'));
    expect(r.value).toEqual({ code: 0, stdout: 'once\n', stderr: '' });
    expect(ran).toHaveLength(1);
    expect(api.names('configmaps', NS)).toEqual([]);
    stop.abort();
    await settle(clock, agent);
  });

  it('made and never taken is withdrawn before the call fails (transient), so its retry never runs beside it', async () => {
    const { clock, api, transport } = setup();
    losingAnswers(api);
    const e = (await settle(clock, transport.exec(node1, 'true'))).error as KrError;
    expect(e.code).toBe('NODE_UNREACHABLE');
    expect(e.transient).toBe('apiserver failure');
    expect(api.names('configmaps', NS)).toEqual([]);
  });
});

describe('who may drive an agent, and whose answers count', () => {
  const request = (name: string, node: string, deadline: number) => ({ name, node, wired: `touch /${name}`, timeoutMs: 1000, deadline });

  it('runs nothing written by anyone but its executor: unsigned, signed by another key, moved to another node or run, or changed', async () => {
    const { clock, api, ran, stop, startAgent, keys, warnings } = setup();
    const other = newAgentKeys();
    const at = clock.now() + 60_000;
    const unsigned = requestObject(NS, RUN, request('kr-exec-unsigned', 'node-1', at), () => '');
    const stranger = requestObject(NS, RUN, request('kr-exec-stranger', 'node-1', at), other.signRequest);
    // signed for node-2, then relabelled for node-1
    const moved = requestObject(NS, RUN, request('kr-exec-moved', 'node-2', at), keys.signRequest);
    moved.metadata.annotations!['kube-runbook/node-name'] = 'node-1';
    moved.metadata.labels = requestObject(NS, RUN, request('x', 'node-1', at), () => '').metadata.labels;
    const changed = requestObject(NS, RUN, request('kr-exec-changed', 'node-1', at), keys.signRequest);
    changed.data!.script = 'rm -rf /';
    const otherRun = requestObject(NS, 'another-run', request('kr-exec-other-run', 'node-1', at), keys.signRequest);
    otherRun.metadata.labels = unsigned.metadata.labels;
    for (const r of [unsigned, stranger, moved, changed, otherRun]) api.put('configmaps', NS, r as never);
    const agent = startAgent();
    await clock.advance(3000);
    expect(ran).toEqual([]);
    expect(api.names('configmaps', NS).filter((n) => n.endsWith('-result'))).toEqual([]);
    expect(warnings.sort()).toEqual([
      "refused request kr-exec-changed: its signature is not this run's executor's; nothing run",
      "refused request kr-exec-moved: its signature is not this run's executor's; nothing run",
      'refused request kr-exec-other-run: it is for another run; nothing run',
      "refused request kr-exec-stranger: its signature is not this run's executor's; nothing run",
      'refused request kr-exec-unsigned: it is not signed; nothing run',
    ]);
    stop.abort();
    await settle(clock, agent);
  });

  it('runs a signed request once: written again under its name after it was taken, it is a replay', async () => {
    const { clock, api, ran, stop, startAgent, keys, warnings } = setup();
    const agent = startAgent();
    const req = requestObject(NS, RUN, request('kr-exec-once', 'node-1', clock.now() + 10_000), keys.signRequest);
    api.put('configmaps', NS, structuredClone(req) as never);
    await clock.advance(2000);
    expect(ran).toHaveLength(1);
    // the executor read its result and deleted both; a copy of the request is written back before its deadline
    for (const n of ['kr-exec-once', resultName('kr-exec-once')]) api.objects.delete(`configmaps/${NS}/${n}`);
    await clock.advance(1000);
    api.put('configmaps', NS, structuredClone(req) as never);
    await clock.advance(3000);
    expect(ran).toHaveLength(1);
    expect(warnings).toContain('refused request kr-exec-once: it was taken before (a replay); nothing run');
    stop.abort();
    await settle(clock, agent);
  });

  it("believes no result its node's agent did not sign: one written before the agent took the request is replaced, one written over its claim is written over", async () => {
    const { clock, api, stop, transport, startAgent, warnings } = setup(async () => {
      await clock.sleep(3000);
      return { code: 0, stdout: 'real\n', stderr: '' };
    });
    // whoever writes ConfigMaps answers every request at once, as its node's agent would, and again while it runs
    const forge = (name: string, state: string) => ({
      metadata: { name: resultName(name), labels: {} },
      data: { state, agent: 'pod-node-1', code: '0', stdout: 'forged\n', stderr: '' },
    });
    const forger = (async () => {
      while (!stop.signal.aborted) {
        for (const o of [...api.objects.values()]) {
          const name = o.metadata.name;
          if (!name.startsWith('kr-exec-') || name.endsWith('-result')) continue;
          const result = api.objects.get(`configmaps/${NS}/${resultName(name)}`) as ConfigMapLite | undefined;
          if (!result) api.put('configmaps', NS, forge(name, 'done') as never);
          else if (result.data?.stdout !== 'forged\n' && result.data?.state === 'running')
            api.put('configmaps', NS, forge(name, 'done') as never);
        }
        await clock.sleep(100).catch(() => undefined);
      }
    })();
    const agent = startAgent();
    const r = await settle(clock, transport.exec(node1, 'true'));
    expect(r.value).toEqual({ code: 0, stdout: 'real\n', stderr: '' });
    expect(warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^node "node-1": the result kr-agents\/kr-exec-[0-9a-f-]+-result is not signed by the node's agent; not believed/,
        ),
        expect.stringMatching(
          /^the result of request kr-exec-\S+ was (written by someone else first; replaced|changed by someone else; written over)/,
        ),
      ]),
    );
    stop.abort();
    await settle(clock, Promise.all([agent, forger]));
  });

  it("another node's agent cannot answer for this node: its results do not verify with this node's key", async () => {
    const { clock, api, stop, transport, keys } = setup();
    // node-2's agent (its own result key) takes a request for node-1, as a forger with node-2's Secret would
    const impostor = serveAgent(
      agentIdentity(keys, { node: 'node-1', agent: 'node-2', namespace: NS, runId: RUN, faultTtlMs: 3_600_000 }),
      { api, clock, log: silentLogger, signal: stop.signal, run: async () => ({ code: 0, stdout: 'impostor', stderr: '' }) },
    );
    const r = await settle(clock, transport.exec(node1, 'true'));
    expect((r.error as KrError).code).toBe('NODE_UNREACHABLE');
    stop.abort();
    await settle(clock, impostor);
  });

  it('ends once the run Lease has not been renewed for faultTtl, and not before, nor while it cannot read it', async () => {
    const { clock, api, stop, startAgent, keys } = setup();
    renewLease(api, keys, '2026-01-01T00:00:00.000000Z');
    let end: string | undefined;
    void startAgent('node-1', { faultTtlMs: 20_000 }).then((e) => (end = e));
    await clock.advance(15_000);
    renewLease(api, keys, '2026-01-01T00:00:15.000000Z');
    await clock.advance(19_000);
    expect(end).toBeUndefined();
    // cut off from the apiserver longer than faultTtl, while the run renews on: it serves on once back
    api.down = true;
    await clock.advance(30_000);
    expect(end).toBeUndefined();
    renewLease(api, keys, '2026-01-01T00:01:04.000000Z');
    api.down = false;
    await clock.advance(2_000);
    expect(end).toBeUndefined();
    const back = clock.now();
    api.objects.delete(`leases/${NS}/${runLeaseName(RUN)}`);
    await clock.runUntil(() => end !== undefined, 30_000, 100);
    expect(end).toBe('run gone');
    // 20 s after it saw the last renewal, on its own clock (the Lease is read each second)
    expect(clock.now() - back).toBeGreaterThan(18_000);
    expect(clock.now() - back).toBeLessThanOrEqual(21_000);
    stop.abort();
  });
});

describe('the agent keepalive', () => {
  it('touches the keepalives once per renewal it sees, never while the Lease stands still or belongs to another run', async () => {
    const { clock, api, ran, stop, startAgent, keys } = setup();
    const renew = (_: FakeAgentApi, holder: string, at: string) => renewLease(api, keys, at, holder);
    const agent = startAgent();
    await clock.advance(3000);
    expect(ran).toEqual([]); // no Lease yet
    renew(api, RUN, '2026-01-01T00:00:03.000000Z');
    await clock.advance(3000);
    expect(ran).toHaveLength(1);
    expect(ran[0]!.wired).toContain(`/var/lib/kube-runbook/deadman/${RUN}`);
    await clock.advance(5000);
    expect(ran).toHaveLength(1); // the same renewal: not touched again, so the dead-man's clock runs
    renew(api, RUN, '2026-01-01T00:00:09.000000Z');
    await clock.advance(1500);
    expect(ran).toHaveLength(2);
    renew(api, 'another-run', '2026-01-01T00:00:12.000000Z');
    await clock.advance(3000);
    expect(ran).toHaveLength(2);
    api.down = true;
    await clock.advance(5000);
    expect(ran).toHaveLength(2);
    stop.abort();
    await settle(clock, agent);
  });
});

describe('an agent started again after its executor is gone', () => {
  it('touches nothing for the renewal it finds: the dead-men keep counting from the last one the node saw', async () => {
    const { clock, api, ran, stop, startAgent, keys } = setup();
    // the executor renewed, then was killed; the node's agent restarts later and reads that renewal
    renewLease(api, keys, '2026-01-01T00:00:00.000000Z');
    const agent = startAgent();
    await clock.advance(10_000);
    expect(ran).toEqual([]);
    // a run that lives renews again: that one counts
    renewLease(api, keys, '2026-01-01T00:00:12.000000Z');
    await clock.advance(2000);
    expect(ran).toHaveLength(1);
    expect(ran[0]!.wired).toContain(`/var/lib/kube-runbook/deadman/${RUN}`);
    stop.abort();
    await settle(clock, agent);
  });
});

describe("the agent's permissions", () => {
  it('names every permission its ServiceAccount lacks, with the fix', async () => {
    const api = new FakeAgentApi();
    api.denied = new Set(['create configmaps', 'get leases']);
    const e = await checkAgentAccess({ namespace: NS, runId: RUN }, api).catch((x: unknown) => x as KrError);
    expect(e).toBeInstanceOf(KrError);
    expect((e as KrError).code).toBe('AGENT_RBAC');
    expect((e as KrError).message).toBe(
      "the agent's ServiceAccount may not create configmaps in kr-agents, get leases.coordination.k8s.io in kr-agents",
    );
    expect((e as KrError).details[0]).toMatch(/kube-runbook agent manifests/);
  });
});

describe("a script's input, sealed for its node's agent", () => {
  const SECRET = 'Authorization: Bearer eyJhbGciOi.the-load-token.sig';

  it('reaches the script, but no request holds it: readers of the namespace and other nodes cannot open it, nor change it', async () => {
    const { clock, api, ran, stop, transport, startAgent, keys } = setup();
    const written: ConfigMapLite[] = [];
    const json = api.json.bind(api);
    api.json = (<T>(path: string, o?: { method?: string; body?: unknown }) => {
      if (o?.method === 'POST' || o?.method === 'PUT') written.push(JSON.parse(JSON.stringify(o.body)) as ConfigMapLite);
      return json<T>(path, o as never);
    }) as typeof api.json;
    const agent = startAgent();
    const r = await settle(clock, transport.exec(node1, 'cat >/dev/null', { input: SECRET, timeoutMs: 5000 }));
    expect(r.value).toMatchObject({ code: 0 });
    // the agent ran the script with its input, as ssh would have
    expect(ran[0]!.wired).toContain(SECRET);
    const request = written.find((o) => o.metadata.labels?.['kube-runbook/kind'] === 'request')!;
    expect(request.data!.input).toBeDefined();
    for (const o of written) expect(JSON.stringify(o)).not.toContain('the-load-token');
    // another node's agent (its own key) cannot open it; an input changed is not the one signed
    const me = {
      node: 'node-1',
      runId: RUN,
      namespace: NS,
      executorKey: createPublicKey({ key: Buffer.from(keys.publicKey, 'base64'), format: 'der', type: 'spki' }),
    };
    expect(readRequest(request, { ...me, resultKey: keys.resultKey('node-1') })).toMatchObject({
      request: { name: request.metadata.name },
    });
    expect(readRequest(request, { ...me, resultKey: keys.resultKey('node-2') })).toEqual({
      refused: "its input is not sealed for this node's key",
    });
    const changed = {
      ...request,
      data: { ...request.data, input: sealInput(keys.resultKey('node-1'), { run: RUN, node: 'node-1', name: 'x' }, 'evil') },
    };
    expect(readRequest(changed, { ...me, resultKey: keys.resultKey('node-1') })).toEqual({
      refused: "its signature is not this run's executor's",
    });
    stop.abort();
    await settle(clock, agent);
  });
});
