import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import type { Ctx } from '../../src/contract/context.js';
import { type SlimNode, type SlimPod, watchSpecs } from '../../src/kube/resources.js';
import { UNREACHABLE } from '../../src/kube/tolerations.js';
import { instanceFor, labBinaries, LAB_VERSION, until } from './helpers/lab.js';
import { labDown, labUp, type LabInfo } from '../../packages/lab/src/index.js';
import probe from '../../src/probes/eviction-forecast.js';
import type { Reading } from '../../src/contract/probe.js';
import { labContext } from './helpers/lab-context.js';
import { ControllerRecorder, keepTrace, labLifecycleSettings } from './helpers/controller-recorder.js';
import { judgeTrace } from '../../src/testing/controller-trace.js';

/**
 * The forecast against the real node lifecycle controller of the lab (LAB_VERSION): kubelet simulators are
 * stopped and the predicted NotReady and eviction times are compared with what the controller then does.
 * Never late; early by at most one monitor period + 2 s.
 */
const run = promisify(execFile);
const INSTANCE = instanceFor('prb');
let lab: LabInfo | undefined;

afterAll(async () => {
  await labDown(INSTANCE);
}, 120_000);

async function up(o: { nodes: number; zones: number }): Promise<LabInfo> {
  await labDown(INSTANCE);
  const binaries = await labBinaries();
  lab = await labUp({
    binaries,
    instance: INSTANCE,
    nodes: o.nodes,
    zones: o.zones,
    grace: '8s',
    monitorPeriod: '1s',
    leaseRenew: '2s',
    toleration: '20s',
  });
  return lab;
}

const stopKubelet = (l: LabInfo, node: string) => run('sh', [join(l.stateDir, 'nodes', node, 'kubelet', 'stop')]);

interface Value {
  earliestEviction: { at: number; pod: string; node: string; likely?: number } | null;
  nodes: { name: string; silent: boolean; notReadyAt?: number; taintAt?: number }[];
  pods: { key: string; node: string; evictAt: number }[];
  masterDisruptionAt: number | null;
  settings: { nodeMonitorPeriodMs: number };
}

/** What the real controller did, as seen on the watches (the times things were observed). */
class Observed {
  notReady = new Map<string, number>();
  tainted = new Map<string, number>();
  /** Nodes with the unreachable NoExecute taint on now. */
  taintedNow = new Set<string>();
  deleted = new Map<string, { node: string; at: number }>();
  readings: Reading[] = [];

  constructor(ctx: Ctx) {
    const hub = ctx.kube.watches!;
    const nodes = hub.watch(watchSpecs.nodes());
    const pods = hub.watch(watchSpecs.pods());
    nodes.subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified') return;
      const n: SlimNode = c.object;
      const now = realClock.now();
      if (n.ready?.status !== 'True' && !this.notReady.has(n.name)) this.notReady.set(n.name, now);
      const tainted = n.taints.some((t) => t.key === UNREACHABLE && t.effect === 'NoExecute');
      if (tainted && !this.tainted.has(n.name)) this.tainted.set(n.name, now);
      if (tainted) this.taintedNow.add(n.name);
      else this.taintedNow.delete(n.name);
    });
    pods.subscribe((c) => {
      if (c.type !== 'modified') return;
      const p: SlimPod = c.object;
      const key = `${p.namespace}/${p.name}`;
      if (p.deletionTimestamp !== undefined && c.previous?.deletionTimestamp === undefined && p.nodeName && !this.deleted.has(key)) {
        this.deleted.set(key, { node: p.nodeName, at: realClock.now() });
        console.log(`deleted ${key} on ${p.nodeName} at ${new Date().toISOString()} (${p.disruption ?? 'no DisruptionTarget'})`);
      }
    });
  }

  firstEviction(node: string): number | undefined {
    const times = [...this.deleted.values()].filter((d) => d.node === node).map((d) => d.at);
    return times.length ? Math.min(...times) : undefined;
  }
}

async function start(l: LabInfo) {
  const { ctx, close } = await labContext(l);
  const observed = new Observed(ctx);
  const recorder = new ControllerRecorder(ctx, l);
  const params = probe.meta.params.parse({ margin: '5m' });
  const pump = (async () => {
    for await (const r of probe.start(ctx, params)) observed.readings.push(r);
  })();
  const stop = () => close(() => pump.catch(() => {}));
  return { ctx, observed, recorder, stop };
}

/**
 * Every forecast made before the event must not be later than it, and the first made from `from` on must be within
 * the bound. Before `from` (the kubelet stopped) the node still renewed: those forecasts count from a heartbeat that
 * was followed by others, and are superseded rather than early.
 */
function compare(readings: Reading[], pick: (v: Value) => number | undefined, actual: number, bound: number, what: string, from: number) {
  const predictions = readings
    .filter((r) => r.value && r.at < actual)
    .map((r) => ({ at: r.at, predicted: pick(r.value as Value) }))
    .filter((p): p is { at: number; predicted: number } => p.predicted !== undefined);
  expect(predictions.length, `a forecast of ${what} before it happened`).toBeGreaterThan(0);
  const late = predictions.filter((p) => p.predicted > actual);
  expect(late, `forecasts of ${what} later than the controller (at ${new Date(actual).toISOString()})`).toEqual([]);
  const first = predictions.find((p) => p.at >= from);
  expect(first, `a forecast of ${what} made after the kubelet stopped, before it happened`).toBeDefined();
  expect(actual - first!.predicted, `${what}: how early the first forecast since the stop was`).toBeLessThanOrEqual(bound);
  return { predicted: first!.predicted, actual, early: actual - first!.predicted, madeBefore: actual - first!.at };
}

/**
 * For each node that kept its taint: the forecast predicted its pods' evictions before they came, never late.
 * (Forecasts made while a zone was still up may predict them much earlier: no bound on how early.)
 */
function expectKeptTaintForecast(observed: Observed, kept: string[]): void {
  for (const name of kept) {
    const actual = observed.firstEviction(name);
    expect(actual, `an eviction on ${name}, which kept its taint`).toBeDefined();
    const before = observed.readings.filter((r) => r.value && r.at < actual!);
    const predicted = before.map((r) => ({ at: r.at, evictAt: podsEvictAt(r.value as Value, name) }));
    expect(predicted.at(-1)?.evictAt, `the last forecast before the eviction on ${name} predicts it`).toBeDefined();
    expect(
      predicted.filter((p) => p.evictAt !== undefined && p.evictAt > actual!),
      `forecasts later than the eviction on ${name}`,
    ).toEqual([]);
    const since = predicted.findLastIndex((p) => p.evictAt === undefined) + 1;
    console.log(
      `kept taint on ${name}: eviction predicted ${actual! - predicted[since]!.at} ms ahead, early by ${actual! - predicted.at(-1)!.evictAt!} ms`,
    );
  }
}

const podsEvictAt = (v: Value, node: string) => {
  const times = v.pods.filter((p) => p.node === node && p.evictAt !== undefined).map((p) => p.evictAt);
  return times.length ? Math.min(...times) : undefined;
};

describe(`eviction-forecast against the real controller (Kubernetes ${LAB_VERSION})`, () => {
  it('one silent node: NotReady and first eviction never late, early by at most a monitor period + 2 s', async () => {
    const l = await up({ nodes: 3, zones: 1 });
    const { observed, stop } = await start(l);
    try {
      await until('a first ok forecast', () => observed.readings.some((r) => r.status === 'ok'), 30_000, 100);
      await stopKubelet(l, 'node-1');
      const stopped = realClock.now();
      await until('the first eviction on node-1', () => observed.firstEviction('node-1') !== undefined, 90_000, 100);
      const bound = 1000 + 2000;
      const nodeOf = (v: Value) => v.nodes.find((n) => n.name === 'node-1');
      const nr = compare(
        observed.readings,
        (v) => nodeOf(v)?.notReadyAt,
        observed.notReady.get('node-1')!,
        bound,
        'NotReady of node-1',
        stopped,
      );
      const ev = compare(
        observed.readings,
        (v) => (v.earliestEviction?.node === 'node-1' ? v.earliestEviction.at : undefined),
        observed.firstEviction('node-1')!,
        bound,
        'first eviction on node-1',
        stopped,
      );
      console.log(
        `one node: NotReady early by ${nr.early} ms (forecast ${nr.madeBefore} ms ahead), first eviction early by ${ev.early} ms (forecast ${ev.madeBefore} ms ahead)`,
      );
    } finally {
      await stop();
    }
  });

  it('every node silent (master disruption mode): no eviction likely, none done, but for a taint the controller keeps', async () => {
    const l = await up({ nodes: 3, zones: 2 });
    const workers = l.nodes.filter((n) => n.roles.includes('worker')).map((n) => n.name);
    const { observed, recorder, stop } = await start(l);
    try {
      await until('a first ok forecast', () => observed.readings.some((r) => r.status === 'ok'), 30_000, 100);
      const stoppedAt = realClock.now();
      await recorder.stop(workers);
      await until('every node NotReady', () => workers.every((n) => observed.notReady.has(n)), 60_000, 100);
      // grace + monitor period + toleration, and 10 s more: any eviction would have come by now
      await realClock.sleep(Math.max(0, stoppedAt + 8_000 + 1_000 + 20_000 + 10_000 - realClock.now()));
      // from the first forecast that sees every node silent on, each knows every zone is down
      const allSilent = (r: Reading) => workers.every((w) => (r.value as Value | null)?.nodes.some((n) => n.name === w && n.silent));
      const from = observed.readings.findIndex(allSilent);
      expect(from, 'a forecast that sees every node silent').toBeGreaterThanOrEqual(0);
      const after = observed.readings.slice(from).filter((r) => r.value);
      expect(after.every((r) => (r.value as Value).masterDisruptionAt !== null)).toBe(true);
      // Entering master disruption mode the controller removes the taints of the nodes as it listed them at the
      // start of that pass: a node tainted during that very pass keeps its taint, and its pods are evicted.
      const kept = workers.filter((n) => observed.taintedNow.has(n));
      const evictedOn = [...new Set([...observed.deleted.values()].map((d) => d.node))].sort();
      expect(evictedOn, 'nodes whose pods the controller deleted: those that kept their taint').toEqual(kept.sort());
      // An eviction on a taint the last pass may keep is possible, never likely: the bound may predict one, the
      // likely moment says none.
      if (kept.length === 0) {
        expect(
          after.filter((r) => (r.value as Value).earliestEviction?.likely !== undefined),
          'forecasts with a likely eviction',
        ).toEqual([]);
        console.log(
          `all silent: seen ${observed.readings[from]!.at - stoppedAt} ms after the stop; ${after.length} forecasts since, none with a likely eviction`,
        );
      } else {
        const kcm = await readFile(join(l.stateDir, 'nodes', 'cp-1', 'kube-controller-manager', 'log'), 'utf8').catch(() => '');
        console.log(
          `the controller kept the taint of ${kept.join(', ')}:\n${kcm
            .split('\n')
            .filter((x) => /disruption|Taint|taint/.test(x))
            .slice(-8)
            .join('\n')}`,
        );
        expectKeptTaintForecast(observed, kept);
      }

      // the record against the model: the stand-in taints and evicts what the controller did (master disruption
      // mode: the taints it removes, the one it may keep), and the forecast is never later than the record
      const trace = await recorder.trace({
        release: `v${(await labBinaries()).version}`,
        scenario: 'all-zones',
        settings: labLifecycleSettings(l),
        start: stoppedAt - 1000,
      });
      const judged = judgeTrace(trace, 50);
      const file = await keepTrace(trace);
      console.log(
        `controller trace ${JSON.stringify({ tainted: judged.tainted, evicted: judged.evicted, untainted: trace.observed.untainted.length, zoneStates: trace.observed.zoneStates, sim: judged.sim, file })}`,
      );
      // which node's taint the controller keeps depends on moments no one sees (the passes' phase, the informers' lag):
      // the stand-in, over its seeds, must do what the controller did at least once
      expect(judged.matching, 'runs of the stand-in that tainted and evicted as the controller did').toBeGreaterThan(0);
      expect(judged.late, 'forecasts from the record later than the record').toEqual([]);
      expect(judged.unforeseen).toEqual([]);
    } finally {
      await stop();
    }
  });
});
