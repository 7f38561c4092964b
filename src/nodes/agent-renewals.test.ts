import { describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logger.js';
import { FakeAgentApi, agentIdentity } from '../testing/fake-agent-api.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeHostFiles } from '../testing/fake-host-files.js';
import { type AgentKeys, newAgentKeys } from './agent-auth.js';
import {
  ANNOTATION_RENEWAL_SEQ,
  ANNOTATION_RENEWAL_SIGNATURE,
  type ConfigMapLite,
  renewalAnnotations,
  requestObject,
  resultName,
  runLeaseName,
} from './agent-protocol.js';
import { MAX_REQUESTS, REQUEST_PAGE, serveAgent } from './agent-server.js';

const NS = 'kr-agents';
const RUN = '20260101T000000Z-test-ab12';
const TTL = 20_000;
const LEASE = `leases/${NS}/${runLeaseName(RUN)}`;

interface LeaseObj {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: { holderIdentity: string; renewTime: string };
}

/** An executor, its node agent on node-1 and the node's files (which outlive the agent), on a fake clock. */
function setup() {
  const clock = new FakeClock();
  const api = new FakeAgentApi();
  const keys = newAgentKeys();
  const files = new FakeHostFiles();
  const warnings: string[] = [];
  const log = { ...silentLogger, warn: (m: string) => void warnings.push(m) };
  /** When the node's keepalives were touched, and what else ran. */
  const touches: number[] = [];
  const ran: string[] = [];
  let stop = new AbortController();
  const startAgent = () => {
    stop = new AbortController();
    let end: string | undefined;
    const p = serveAgent(agentIdentity(keys, { node: 'node-1', namespace: NS, runId: RUN, faultTtlMs: TTL }), {
      api,
      clock,
      log,
      signal: stop.signal,
      files,
      run: async (wired) => {
        if (wired.includes('/var/lib/kube-runbook/deadman/')) touches.push(clock.now());
        else ran.push(wired);
        return { code: 0, stdout: '', stderr: '' };
      },
    }).then((e) => (end = e));
    const stopped = async () => {
      stop.abort();
      await clock.runUntil(() => end !== undefined, 10_000, 50);
      await p;
    };
    return {
      ended: () => end,
      stop: stopped,
      /** Killed (SIGKILL, out of memory): it removes nothing on its way out, and its container is started again. */
      crash: async () => {
        files.broken = true;
        await stopped();
        files.broken = false;
      },
    };
  };
  const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString().replace('Z', '000Z');
  /** The executor renews the run Lease, as RunAgents.renew writes it. */
  const renew = (k: Pick<AgentKeys, 'signRenewal'> = keys) =>
    api.put('leases', NS, {
      metadata: { name: runLeaseName(RUN), annotations: renewalAnnotations(NS, RUN, at(clock.now()), k) },
      spec: { holderIdentity: RUN, renewTime: at(clock.now()) },
    });
  const lease = () => structuredClone(api.objects.get(LEASE)) as unknown as LeaseObj;
  return { clock, api, keys, files, warnings, touches, ran, startAgent, renew, lease, at };
}

/**
 * Whoever may update Leases in the agent namespace, once a second after the executor is gone, in the ways it can: a
 * new renewTime under the executor's last signature, no signature, a signature of its own key, and an older renewal
 * of the executor written back as it was.
 */
function hostileRenewer(s: ReturnType<typeof setup>, older: LeaseObj) {
  const mine = newAgentKeys();
  let n = 0;
  return () => {
    const now = s.at(s.clock.now());
    const last = s.lease();
    const forged: LeaseObj[] = [
      { ...last, spec: { ...last.spec, renewTime: now } },
      { metadata: { name: last.metadata.name }, spec: { ...last.spec, renewTime: now } },
      {
        metadata: { name: last.metadata.name, annotations: renewalAnnotations(NS, RUN, now, mine) },
        spec: { ...last.spec, renewTime: now },
      },
      older,
    ];
    s.api.put('leases', NS, forged[n++ % forged.length] as never);
  };
}

describe('the run Lease renewals an agent counts', () => {
  it('the executor gone, a Lease writer renewing every second keeps no dead-man alive: they fire faultTtl after its last renewal', async () => {
    const s = setup();
    const agent = s.startAgent();
    // the executor renews every 5 s for 30 s, then is killed
    s.renew();
    const older = s.lease();
    for (let i = 0; i < 6; i++) {
      await s.clock.advance(5000);
      s.renew();
    }
    await s.clock.advance(1500);
    expect(s.touches.length).toBe(6); // each renewal it saw but the one it found at start
    const killed = s.clock.now();
    const lastRenewalSeen = s.touches.at(-1)!;
    // the hostile renewer takes over: its writes every second, for three faultTtl
    const forge = hostileRenewer(s, older);
    for (let t = 0; t < 3 * TTL && agent.ended() === undefined; t += 1000) {
      forge();
      await s.clock.advance(1000);
    }
    // not one touch after the executor's last renewal: the node's dead-men fire faultTtl after it
    expect(s.touches.at(-1)).toBe(lastRenewalSeen);
    expect(s.touches.every((t) => t < killed)).toBe(true);
    // and the agent ends, its run gone, faultTtl (and a read) after the last renewal it counted
    expect(agent.ended()).toBe('run gone');
    expect(s.clock.now() - lastRenewalSeen).toBeLessThanOrEqual(TTL + 2000);
    // each kind of forgery said once, not at every write
    const ignored = s.warnings.filter((w) => w.startsWith('ignored run Lease renewal: '));
    expect(ignored).toEqual([
      expect.stringMatching(
        /^ignored run Lease renewal: its signature \(renewal 7, renewTime .*\) is not this agent's executor's: changed since it was signed, or signed with another key$/,
      ),
      expect.stringMatching(/^ignored run Lease renewal: it is not signed \(renewTime .*\)$/),
      'ignored run Lease renewal: renewal 1 is older than renewal 7, counted already (an old renewal written back)',
    ]);
  });

  it("the executor's own renewals, beside the same writer's, keep the dead-men alive", async () => {
    const s = setup();
    const agent = s.startAgent();
    s.renew();
    const older = s.lease();
    await s.clock.advance(1500);
    const forge = hostileRenewer(s, older);
    for (let t = 0; t < 3 * TTL; t += 1000) {
      if (t % 5000 === 0) s.renew();
      else forge();
      await s.clock.advance(1000);
    }
    expect(agent.ended()).toBeUndefined();
    // every renewal of the executor counted (the one found at start aside), and nothing else
    expect(s.touches.length).toBe(3 * (TTL / 5000));
    await agent.stop();
  });

  it('an old renewal of the executor written back after the agent restarts does not count either (the node remembers the last)', async () => {
    const s = setup();
    let agent = s.startAgent();
    s.renew();
    const first = s.lease();
    for (let i = 0; i < 3; i++) {
      await s.clock.advance(5000);
      s.renew();
    }
    await s.clock.advance(1500);
    expect(s.touches.length).toBe(3);
    const latest = s.lease();
    await agent.crash();
    // the old renewal written back while the agent is away, so it is the first it reads; then the latest again
    s.api.put('leases', NS, first as never);
    agent = s.startAgent();
    await s.clock.advance(3000);
    s.api.put('leases', NS, latest as never);
    await s.clock.advance(3000);
    expect(s.touches.length).toBe(3);
    expect(s.warnings).toContain(
      'ignored run Lease renewal: renewal 1 is older than renewal 4, counted already (an old renewal written back)',
    );
    // the executor's next renewal counts
    s.renew();
    await s.clock.advance(1500);
    expect(s.touches.length).toBe(4);
    expect(Number(s.lease().metadata.annotations?.[ANNOTATION_RENEWAL_SEQ])).toBe(5);
    await agent.stop();
  });

  it('a renewal signed for another namespace or moved to another renewTime does not verify', async () => {
    const s = setup();
    const agent = s.startAgent();
    s.renew();
    await s.clock.advance(1500);
    const elsewhere = renewalAnnotations('other-ns', RUN, s.at(s.clock.now()), s.keys);
    s.api.put('leases', NS, {
      metadata: { name: runLeaseName(RUN), annotations: elsewhere },
      spec: { holderIdentity: RUN, renewTime: s.at(s.clock.now()) },
    });
    await s.clock.advance(1500);
    expect(s.touches).toEqual([]);
    expect(s.warnings.at(-1)).toMatch(/^ignored run Lease renewal: its signature \(renewal 2, .*\) is not this agent's executor's/);
    expect(s.lease().metadata.annotations?.[ANNOTATION_RENEWAL_SIGNATURE]).toBe(elsewhere[ANNOTATION_RENEWAL_SIGNATURE]);
    await agent.stop();
  });
});

describe("an agent's memory of the requests it took", () => {
  const request = (s: ReturnType<typeof setup>, name: string) =>
    requestObject(
      NS,
      RUN,
      { name, node: 'node-1', wired: `touch /${name}`, timeoutMs: 1000, deadline: s.clock.now() + 15_000 },
      s.keys.signRequest,
    );

  it('refuses, after a restart, a request it took before it (a copy written back within its deadline)', async () => {
    const s = setup();
    let agent = s.startAgent();
    const req = request(s, 'kr-exec-once');
    s.api.put('configmaps', NS, structuredClone(req) as never);
    await s.clock.advance(2000);
    expect(s.ran.filter((w) => w.includes('touch /kr-exec-once'))).toHaveLength(1);
    // the executor read its result and deleted both; the agent restarts; a copy is written back
    for (const n of ['kr-exec-once', resultName('kr-exec-once')]) s.api.objects.delete(`configmaps/${NS}/${n}`);
    await agent.stop();
    agent = s.startAgent();
    await s.clock.advance(1000);
    s.api.put('configmaps', NS, structuredClone(req) as never);
    await s.clock.advance(3000);
    expect(s.ran.filter((w) => w.includes('touch /kr-exec-once'))).toHaveLength(1);
    expect(s.warnings).toContain('refused request kr-exec-once: it was taken before (a replay); nothing run');
    // past its deadline and the time it is remembered, the run over: nothing is left on the node
    await s.clock.advance(70_000);
    await agent.stop();
    expect([...s.files.files.keys()]).toEqual([]);
  });

  it('runs nothing it cannot remember taking', async () => {
    const s = setup();
    const agent = s.startAgent();
    await s.clock.advance(1000);
    s.files.broken = true;
    s.api.put('configmaps', NS, request(s, 'kr-exec-unremembered') as never);
    await s.clock.advance(3000);
    expect(s.ran.filter((w) => w.includes('touch /kr-exec-unremembered'))).toEqual([]);
    expect(s.warnings).toContain('request kr-exec-unremembered not run: this agent cannot remember it was taken (no space left on device)');
    s.files.broken = false;
    await agent.stop();
  });
});

describe("an agent's list of requests", () => {
  it('is read in pages and bounded: a flood of ConfigMaps for its node is never held at once, and what is past the bound waits', async () => {
    const s = setup();
    const FLOOD = MAX_REQUESTS + 500;
    const label = request0(s).metadata.labels!;
    for (let i = 0; i < FLOOD; i++)
      s.api.put('configmaps', NS, {
        metadata: { name: `kr-exec-flood-${String(i).padStart(5, '0')}`, labels: label, annotations: request0(s).metadata.annotations },
        data: { script: 'touch /flood', timeoutMs: '1000', deadline: new Date(s.clock.now() + 60_000).toISOString(), signature: 'AAAA' },
      } as never);
    // the executor's own request sorts first
    s.api.put('configmaps', NS, request0(s) as never);
    const pages: { limit: unknown; items: number }[] = [];
    const json = s.api.json.bind(s.api);
    s.api.json = async <T>(path: string, o?: Parameters<typeof json>[1]) => {
      const r = await json<T>(path, o);
      if (path.endsWith('/configmaps') && !o?.method)
        pages.push({ limit: o?.query?.limit, items: (r as { items: unknown[] }).items.length });
      return r;
    };
    const agent = s.startAgent();
    await s.clock.advance(3000);
    expect(s.ran.filter((w) => w.includes('touch /kr-exec-0-real'))).toHaveLength(1);
    expect(pages.length).toBeGreaterThan(0);
    expect(pages.every((p) => p.limit === REQUEST_PAGE && p.items <= REQUEST_PAGE)).toBe(true);
    // each pass reads MAX_REQUESTS, no more, and says once that there are more
    const refused = s.warnings.filter((w) => w.startsWith('refused request kr-exec-flood-'));
    expect(refused).toHaveLength(MAX_REQUESTS - 1);
    expect(s.warnings.filter((w) => w.startsWith(`more than ${MAX_REQUESTS} requests are written for this node`))).toHaveLength(1);
    await agent.stop();
  });
});

function request0(s: ReturnType<typeof setup>): ConfigMapLite {
  return requestObject(
    NS,
    RUN,
    { name: 'kr-exec-0-real', node: 'node-1', wired: 'touch /kr-exec-0-real', timeoutMs: 1000, deadline: s.clock.now() + 15_000 },
    s.keys.signRequest,
  );
}
