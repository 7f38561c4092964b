import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { labBinaries, LAB_VERSION } from './helpers/lab.js';
import { labDown, labUp } from '../../packages/lab/src/index.js';
import { defaultRegistry } from '../../src/engine/registry.js';
import type { Reading } from '../../src/contract/probe.js';
import { labContext } from './helpers/lab-context.js';

/**
 * Stop the lab's apiserver while every cluster probe runs: each reads unknown within its bound (nothing from the
 * apiserver for 5 s at most); start it again: each recovers, in the same run, without being restarted.
 */
const run = promisify(execFile);

/** Tries to connect every 50 ms until a connection is refused; returns when that happened. */
async function refusedSince(url: URL): Promise<number> {
  for (;;) {
    const at = realClock.now();
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect({ host: url.hostname, port: Number(url.port || 443), timeout: 500 });
      s.once('connect', () => (s.destroy(), resolve(false)));
      s.once('timeout', () => (s.destroy(), resolve(false)));
      s.once('error', () => resolve(true));
    });
    if (refused) return at;
    await realClock.sleep(50);
  }
}
const INSTANCE = 'prb2';
const STALE_BOUND_MS = 5_000;

afterAll(async () => {
  await labDown(INSTANCE);
}, 120_000);

const PROBES: [string, Record<string, unknown>][] = [
  ['node-leases', { staleAfter: '1h' }],
  ['node-ready', {}],
  ['noexecute-taints', {}],
  ['pod-deletions', { max: 1000 }],
  ['eviction-forecast', {}],
  ['endpoints-stability', {}],
  ['controller-manager', {}],
  ['apiserver-health', { unreachable: 'unknown', interval: '1s', timeout: '1s' }],
];

describe(`cluster probes when the apiserver stops and starts (Kubernetes ${LAB_VERSION})`, () => {
  it('every probe goes unknown within its bound and recovers without restarting the run', async () => {
    await labDown(INSTANCE);
    const binaries = await labBinaries();
    const lab = await labUp({ binaries, instance: INSTANCE, nodes: 2, zones: 1 });
    const probes = await labContext(lab);
    const ctx = probes.ctx;
    const readings = new Map<string, Reading[]>();
    const pumps: Promise<void>[] = [];
    // one after the other: concurrent first imports of modules that share dependencies can deadlock the test runner
    for (const [id, params] of PROBES) {
      const probe = await defaultRegistry.probe(id);
      const list: Reading[] = [];
      readings.set(id, list);
      pumps.push(
        (async () => {
          for await (const r of probe.start(ctx, probe.meta.params.parse(params))) list.push(r);
        })(),
      );
    }
    const last = (id: string) => readings.get(id)!.at(-1);
    const waitAll = async (pred: (r: Reading | undefined) => boolean, ms: number, what: string) => {
      const end = realClock.now() + ms;
      for (;;) {
        const missing = PROBES.map(([id]) => id).filter((id) => !pred(last(id)));
        if (!missing.length) return;
        if (realClock.now() > end)
          throw new Error(`${what}: still not for ${missing.map((id) => `${id} (${last(id)?.status}: ${last(id)?.detail})`).join(', ')}`);
        await realClock.sleep(50);
      }
    };
    const apiserver = (verb: string) => run('sh', [join(lab.stateDir, 'nodes', 'cp-1', 'kube-apiserver', verb)]);
    try {
      await waitAll((r) => r !== undefined && r.status !== 'unknown', 60_000, 'first known readings');

      // The apiserver shuts down gracefully: it stops taking connections at once and exits within seconds.
      // "Stopped" is the first moment a connection to it is refused.
      const stopping = apiserver('stop');
      const stoppedAt = await refusedSince(new URL(lab.apiserverUrl));
      await waitAll((r) => r?.status === 'unknown', STALE_BOUND_MS + 2_000, 'unknown after the apiserver stopped');
      const took = PROBES.map(([id]) => {
        const list = readings.get(id)!;
        const r = list.find((x, i) => x.status === 'unknown' && list.slice(i).every((y) => y.status === 'unknown'));
        return [id, r ? r.at - stoppedAt : Infinity] as const;
      });
      for (const [id, ms] of took)
        expect(ms, `${id} read unknown ${ms} ms after the apiserver stopped`).toBeLessThanOrEqual(STALE_BOUND_MS);
      console.log(`unknown after the apiserver stopped taking connections (ms): ${took.map(([id, ms]) => `${id} ${ms}`).join(', ')}`);
      await stopping;

      await realClock.sleep(3_000);
      await apiserver('start');
      const startedAt = realClock.now();
      await waitAll(
        (r) => r !== undefined && r.status !== 'unknown' && r.at >= startedAt,
        60_000,
        'known again after the apiserver started',
      );
      const back = PROBES.map(
        ([id]) => [id, readings.get(id)!.find((x) => x.at >= startedAt && x.status !== 'unknown')!.at - startedAt] as const,
      );
      console.log(`known again after the apiserver started (ms): ${back.map(([id, ms]) => `${id} ${ms}`).join(', ')}`);
    } finally {
      await probes.close(() => Promise.race([Promise.allSettled(pumps), realClock.sleep(10_000)]));
    }
  });
});
