import { describe, expect, it } from 'vitest';
import { KrError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { FakeAgentApi, FakeStatusError } from '../testing/fake-agent-api.js';
import { FakeClock } from '../testing/fake-clock.js';
import { AgentTransport } from '../inventory/schema.js';
import { agentTransport } from './agent.js';
import { checkAgentAccess, serveAgent } from './agent-server.js';
import { requestObject, runLeaseName } from './agent-protocol.js';
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
  const transport = agentTransport(config, { api, runId: RUN, clock });
  const startAgent = (node = 'node-1') =>
    serveAgent(
      { node, namespace: NS, runId: RUN, agent: `pod-${node}` },
      {
        api,
        clock,
        log: silentLogger,
        signal: stop.signal,
        run: (wired, timeoutMs) => {
          ran.push({ wired, timeoutMs });
          return run(wired, timeoutMs);
        },
      },
    );
  return { clock, api, ran, stop, transport, startAgent };
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
    expect(clock.now() - t0).toBeGreaterThanOrEqual(15_000);
    expect(clock.now() - t0).toBeLessThan(16_000);
    expect(api.names('configmaps', NS)).toEqual([]);
  });

  it('an agent never starts a request after its deadline, nor one withdrawn between its list and its claim', async () => {
    const { clock, api, ran, stop, startAgent } = setup();
    const late = requestObject(NS, RUN, { name: 'kr-exec-late', node: 'node-1', wired: 'touch /late', timeoutMs: 1000, deadline: clock.now() - 1 });
    api.put('configmaps', NS, late as never);
    // a list answered from before the executor withdrew its request
    const withdrawn = requestObject(NS, RUN, { name: 'kr-exec-withdrawn', node: 'node-1', wired: 'touch /withdrawn', timeoutMs: 1000, deadline: clock.now() + 60_000 });
    const list = api.json.bind(api);
    api.json = async <T,>(path: string, o?: Parameters<typeof list>[1]) => {
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

describe('the agent keepalive', () => {
  const renew = (api: FakeAgentApi, holder: string, at: string) =>
    api.put('leases', NS, { metadata: { name: runLeaseName(RUN) }, spec: { holderIdentity: holder, renewTime: at } });

  it('touches the keepalives once per renewal it sees, never while the Lease stands still or belongs to another run', async () => {
    const { clock, api, ran, stop, startAgent } = setup();
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

describe("the agent's permissions", () => {
  it('names every permission its ServiceAccount lacks, with the fix', async () => {
    const api = new FakeAgentApi();
    api.denied = new Set(['create configmaps', 'get leases']);
    const e = await checkAgentAccess({ node: 'node-1', namespace: NS, runId: RUN, agent: 'a' }, api).catch((x: unknown) => x as KrError);
    expect(e).toBeInstanceOf(KrError);
    expect((e as KrError).code).toBe('AGENT_RBAC');
    expect((e as KrError).message).toBe("the agent's ServiceAccount may not create configmaps in kr-agents, get leases.coordination.k8s.io in kr-agents");
    expect((e as KrError).details[0]).toMatch(/kube-runbook agent manifests/);
  });
});
