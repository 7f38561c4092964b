import { afterEach, describe, expect, it } from 'vitest';
import type { Probe } from '../contract/probe.js';
import { paths } from '../kube/resources.js';
import { ProbeTester, iso } from '../testing/probe-tester.js';
import evictionForecast from './eviction-forecast.js';
import nodeLeases from './node-leases.js';
import nodeReady from './node-ready.js';
import noexecuteTaints from './noexecute-taints.js';

/**
 * On a large cluster nearly every event is a healthy node heartbeating: a Lease renewed, a NodeStatus posted. None
 * of them can change what these probes read, so none may cost a judgement over the whole fleet; the one node that
 * stops heartbeating must still be seen on time.
 */

let t: ProbeTester;
afterEach(async () => t.close());

const NODES = Array.from({ length: 40 }, (_, i) => `fleet-${i + 1}`);
const RENEW_MS = 2000;
const STATUS_MS = 10_000;
const MINUTE = 60_000;

function fleet(silent: string) {
  t = new ProbeTester({ start: 1_000_000 });
  for (const n of NODES) {
    t.putNode(n, { labels: { 'topology.kubernetes.io/zone': 'zone-a' } });
    t.renewLease(n);
    t.putPod('default', `web-${n}`, { node: n });
  }
  const start = t.clock.now();
  const stopAt = start + 5000;
  const renew = () => {
    for (const n of NODES) if (n !== silent || t.clock.now() < stopAt) t.renewLease(n);
    t.clock.setTimer(RENEW_MS, renew);
  };
  const status = () => {
    for (const n of NODES)
      if (n !== silent || t.clock.now() < stopAt)
        t.api.update(paths.nodes, n, (o) => {
          (o.status as { conditions: { lastHeartbeatTime: string }[] }).conditions[0]!.lastHeartbeatTime = iso(t.clock.now());
        });
    t.clock.setTimer(STATUS_MS, status);
  };
  t.clock.setTimer(RENEW_MS, renew);
  t.clock.setTimer(STATUS_MS, status);
  // the silent node's last renewal: the last renewal tick before it stopped
  return start + Math.floor((stopAt - start - 1) / RENEW_MS) * RENEW_MS;
}

const heartbeatsIn = (ms: number) => NODES.length * (Math.floor(ms / RENEW_MS) + Math.floor(ms / STATUS_MS));

const cases: { probe: Probe; params: Record<string, unknown>; sees: string }[] = [
  { probe: nodeLeases, params: { staleAfter: '20s' }, sees: 'fleet-7 ' },
  { probe: evictionForecast, params: { margin: '10m', silentAfter: '20s' }, sees: 'fleet-7' },
  { probe: nodeReady, params: {}, sees: '40/40 Ready' },
  { probe: noexecuteTaints, params: {}, sees: 'no NoExecute taint on 40 nodes' },
];

describe('healthy heartbeats cost no judgement', () => {
  for (const c of cases)
    it(`${c.probe.meta.id}: a minute of ${heartbeatsIn(MINUTE)} heartbeats from 40 nodes, judged a few times, and what changes is still seen`, async () => {
      const lastRenewal = fleet('fleet-7');
      const run = t.start(c.probe, c.params);
      await run.until((r) => r.status !== 'unknown');
      const before = t.judgements;
      await t.advance(MINUTE);
      expect(t.judgements - before).toBeLessThan(heartbeatsIn(MINUTE) / 20);
      const seen = run.readings.find((r) => r.detail.includes(c.sees));
      expect(seen, JSON.stringify(run.last())).toBeDefined();
      if (c.probe === nodeLeases) expect(seen!.at).toBe(lastRenewal + 20_001);
    });
});
