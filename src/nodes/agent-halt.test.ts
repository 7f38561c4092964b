import { execFileSync } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../core/logger.js';
import { FakeAgentApi } from '../testing/fake-agent-api.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeHostFiles } from '../testing/fake-host-files.js';
import { tempDirEach } from '../testing/temp-dir.js';
import { newAgentKeys } from './agent-auth.js';
import { HALT_NAME, haltSilenceMs } from './agent-halt.js';
import { renewalAnnotations, runLeaseName } from './agent-protocol.js';
import { serveAgent } from './agent-server.js';
import { fireFaultsScript } from './keepalive.js';

const NS = 'kr-agents';
const RUN = '20260101T000000Z-test-ab12';
const TTL = 60_000;

/**
 * A node agent following the halts of `haltNamespaces` (the cluster's only, by default), its executor renewing the run
 * Lease every 15 s until told to stop; `halt` sets the one of `haltIn`.
 */
function setup(haltNamespaces = ['kube-system'], haltIn = 'kube-system') {
  const clock = new FakeClock();
  const api = new FakeAgentApi();
  const keys = newAgentKeys();
  const warnings: string[] = [];
  const fired: number[] = [];
  const stop = new AbortController();
  let end: string | undefined;
  const p = serveAgent(
    {
      node: 'node-1',
      namespace: NS,
      runId: RUN,
      agent: 'pod-node-1',
      executorKey: createPublicKey({ key: Buffer.from(keys.publicKey, 'base64'), format: 'der', type: 'spki' }),
      resultKey: keys.resultKey('node-1'),
      faultTtlMs: TTL,
      haltNamespaces,
    },
    {
      api,
      clock,
      log: { ...silentLogger, warn: (m: string) => void warnings.push(m) },
      signal: stop.signal,
      files: new FakeHostFiles(),
      run: async (wired) => {
        if (wired.includes('touch -t 1970')) fired.push(clock.now());
        return { code: 0, stdout: wired.includes('touch -t 1970') ? `/var/lib/kube-runbook/deadman/${RUN}/f1\n` : '', stderr: '' };
      },
    },
  ).then((e) => (end = e));
  const at = () => new Date(clock.now()).toISOString().replace('Z', '000Z');
  const renew = () =>
    api.put('leases', NS, {
      metadata: { name: runLeaseName(RUN), annotations: renewalAnnotations(NS, RUN, at(), keys) },
      spec: { holderIdentity: RUN, renewTime: at() },
    });
  const halt = () => api.put('leases', haltIn, { metadata: { name: HALT_NAME }, spec: { holderIdentity: 'alice@ops' } });
  /** The executor renews every 15 s for `ms`. */
  const renewFor = async (ms: number) => {
    for (let t = 0; t < ms; t += 15_000) {
      renew();
      await clock.advance(15_000);
    }
  };
  const done = async () => {
    stop.abort();
    await clock.runUntil(() => end !== undefined, 10_000, 50);
    await p;
  };
  return { clock, api, warnings, fired, renew, renewFor, halt, done };
}

describe('a node agent at a halt', () => {
  it("fires its faults' dead-men once its executor renews nothing, long before faultTtl; not while the executor rolls back", async () => {
    const s = setup();
    await s.renewFor(30_000);
    s.halt();
    // the executor, alive, rolls back itself: its renewals go on, and the agent fires nothing beside its reverts
    await s.renewFor(90_000);
    expect(s.fired).toEqual([]);
    expect(s.warnings).toContainEqual(expect.stringMatching(/^halted by alice@ops \(Lease kube-system\/kube-runbook-halt\): /));
    // then it goes silent (killed, cut off): the agent fires the dead-men after two missed renewals and 5 s (and its reads, a second each)
    const silent = s.clock.now() - 15_000;
    await s.clock.runUntil(() => s.fired.length > 0, TTL, 500);
    expect(s.fired).toHaveLength(1);
    expect(s.fired[0]! - silent).toBeLessThanOrEqual(haltSilenceMs(TTL) + 4_000);
    expect(s.fired[0]! - silent).toBeLessThan(TTL);
    expect(s.warnings.at(-1)).toMatch(/^halted by alice@ops and no renewal of the run Lease for .*: fired 1 fault dead-man\(s\) now$/);
    await s.done();
  });

  it("of a run locked in kr-locks, fires at the cluster's halt (kube-system) as at its lock namespace's own", async () => {
    for (const where of ['kube-system', 'kr-locks']) {
      const s = setup(['kube-system', 'kr-locks'], where);
      await s.renewFor(30_000);
      s.halt();
      const silent = s.clock.now() - 15_000;
      await s.clock.runUntil(() => s.fired.length > 0, TTL, 500);
      expect(s.fired, `halted in ${where}`).toHaveLength(1);
      expect(s.fired[0]! - silent, `halted in ${where}`).toBeLessThan(TTL - 10_000);
      expect(s.warnings[0]).toContain(`(Lease ${where}/kube-runbook-halt)`);
      await s.done();
    }
  });

  it('of a run locked in kube-system, leaves its dead-men to faultTtl at a halt of another namespace', async () => {
    const s = setup(['kube-system'], 'kr-locks');
    await s.renewFor(30_000);
    s.halt();
    await s.clock.advance(TTL - 20_000);
    expect(s.fired).toEqual([]);
    expect(s.warnings).toEqual([]);
    await s.done();
  });

  it('without a halt, an executor gone leaves the dead-men to faultTtl', async () => {
    const s = setup();
    await s.renewFor(30_000);
    await s.clock.advance(TTL + 5_000);
    expect(s.fired).toEqual([]);
    await s.done();
  });
});

describe("the node's script that fires the faults' dead-men now", () => {
  let dir = '';
  tempDirEach('kr-fire-', (d) => (dir = d));

  it("dates back the keepalives of the run's faults only: not a remediation's, not another run's, not one fired", () => {
    const arm = (run: string, fault: string, onBoot: string) => {
      const d = join(dir, run, fault);
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, 'keepalive'), '');
      writeFileSync(join(d, 'on-boot'), `${onBoot}\n`);
      return join(d, 'keepalive');
    };
    const fault = arm(RUN, 'f1', 'revert');
    const remediation = arm(RUN, 'r1', 'rewatch');
    const older = arm(RUN, 'f0', '');
    const other = arm('20260101T000000Z-other-cd34', 'f1', 'revert');
    const done = arm(RUN, 'f2.fired', 'revert');
    const printed = execFileSync('sh', ['-c', fireFaultsScript(RUN, dir)], { encoding: 'utf8' });
    expect(printed).toBe(`${join(dir, RUN, 'f1')}\n`);
    const age = (f: string) => Date.now() - statSync(f).mtimeMs; // eslint-disable-line no-restricted-syntax -- a real file's mtime
    expect(age(fault)).toBeGreaterThan(365 * 24 * 3600_000);
    for (const f of [remediation, older, other, done]) expect(age(f)).toBeLessThan(3600_000);
  });
});
