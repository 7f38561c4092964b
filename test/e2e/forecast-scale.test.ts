import { spawn, type ChildProcess } from 'node:child_process';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import type { Ctx } from '../../src/contract/context.js';
import type { Reading } from '../../src/contract/probe.js';
import { type SlimNode, type SlimPod, watchSpecs } from '../../src/kube/resources.js';
import { UNREACHABLE } from '../../src/kube/tolerations.js';
import { parseKubeVersion, traitsOf } from '../../src/kube/versions.js';
import { judgeTrace, twoZoneDepartures } from '../../src/testing/controller-trace.js';
import { FLEET_LABEL, labDown, labUp, type LabInfo } from '../../packages/lab/src/index.js';
import probe from '../../src/probes/eviction-forecast.js';
import { instanceFor, LAB_BIN, labBinaries, LAB_VERSION, until } from './helpers/lab.js';
import { labContext } from './helpers/lab-context.js';
import { cpuBetween, labUsage } from './helpers/lab-usage.js';
import { ControllerRecorder, keepTrace, labLifecycleSettings } from './helpers/controller-recorder.js';

/**
 * The eviction forecast against the real node lifecycle controller at scale: three zones above the large-cluster
 * threshold, one partially disrupted (its nodes tainted at the secondary rate, a backlog the controller re-queues in a
 * new order every pass), one with a few silent nodes (the normal rate), one healthy. Every node's taint and first
 * eviction must be forecast before they happen, and no forecast may be later than the controller.
 *
 * The same run records the controller's decisions (test/e2e/helpers/controller-recorder.ts) and replays them through
 * the controller stand-in (src/testing/controller-sim.ts), which must taint and evict the same nodes and pods, and
 * through the forecast, never later than the record; KUBE_RUNBOOK_RECORD_TRACES=1 keeps the trace as the fixture
 * src/forecast/fixtures/real-controller-<release>-two-zones.json (src/forecast/real-controller.test.ts).
 *
 * KUBE_RUNBOOK_FORECAST_SCALE=full runs the size of the benchmark (bench/forecast-lab.bench.js): 180 nodes in zones of
 * 60, 18 silent in zone-a and 6 in zone-b, at the controller's and kubelet's default timings but the toleration;
 * KUBE_RUNBOOK_FORECAST_SCALE=large, 1,000 nodes in 4 zones of 250 (200 of `lab up`, 800 of `lab fleet`), 48 silent
 * in zone-a (unhealthy-zone threshold 0.15) and 10 in zone-b. The
 * default, for CI on each release, is 36 nodes in zones of 12 (large-cluster threshold 10), 5 and 2 silent, at the
 * lab's short timings and rates of 0.5 and 0.2 nodes a second: the same shape, and still a backlog in zone-a that the
 * controller hands out of order on 1.34 and 1.37 and that leaves leftover queue entries on 1.20.
 */
const INSTANCE = instanceFor('fsc');
const SIZE = process.env.KUBE_RUNBOOK_FORECAST_SCALE;
const KUBELET = { grace: '40s', monitor: '5s', renew: '10s' };
const LAB = { grace: '8s', monitor: '1s', renew: '2s' };
const SHAPES = {
  full: { zones: 3, zoneSize: 60, fleet: 0, largeCluster: 50, unhealthy: 0.25, silentA: 18, silentB: 6, ...KUBELET, rates: [0.1, 0.05] },
  // 200 nodes of `lab up` (the ones that go silent: each has its own forwarder to stop) and 800 of `lab fleet`
  large: {
    zones: 4,
    zoneSize: 250,
    fleet: 800,
    largeCluster: 50,
    unhealthy: 0.15,
    silentA: 48,
    silentB: 10,
    ...KUBELET,
    rates: [0.2, 0.1],
  },
  ci: { zones: 3, zoneSize: 12, fleet: 0, largeCluster: 10, unhealthy: 0.25, silentA: 5, silentB: 2, ...LAB, rates: [0.5, 0.2] },
} as const;
const SHAPE = SIZE === 'full' || SIZE === 'large' ? SHAPES[SIZE] : SHAPES.ci;
const TOLERATION_MS = SHAPE === SHAPES.ci ? 6_000 : 15_000;
const NODES = SHAPE.zones * SHAPE.zoneSize;

afterAll(async () => {
  await labDown(INSTANCE);
}, 300_000);

interface Value {
  nodes: { name: string; taintAt?: number; taintLikely?: number; tainted: boolean }[];
  pods: { key: string; node: string; evictAt?: number }[];
  failingNodes: number;
}

/** What the controller did, as the watches saw it. */
class Observed {
  tainted = new Map<string, number>();
  deleted = new Map<string, { node: string; at: number }>();
  readings: Reading[] = [];

  constructor(ctx: Ctx) {
    const hub = ctx.kube.watches!;
    hub.watch(watchSpecs.nodes()).subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified') return;
      const n: SlimNode = c.object;
      if (n.taints.some((t) => t.key === UNREACHABLE && t.effect === 'NoExecute') && !this.tainted.has(n.name))
        this.tainted.set(n.name, realClock.now());
    });
    hub.watch(watchSpecs.pods()).subscribe((c) => {
      if (c.type !== 'modified') return;
      const p: SlimPod = c.object;
      const key = `${p.namespace}/${p.name}`;
      if (p.deletionTimestamp !== undefined && c.previous?.deletionTimestamp === undefined && p.nodeName && !this.deleted.has(key))
        this.deleted.set(key, { node: p.nodeName, at: realClock.now() });
    });
  }

  firstEviction(node: string): number | undefined {
    const times = [...this.deleted.values()].filter((d) => d.node === node).map((d) => d.at);
    return times.length ? Math.min(...times) : undefined;
  }
}

/** `lab fleet` beside the lab, for zones larger than `lab up` makes: its nodes renew and stay Ready; returns once all are. */
async function startFleet(lab: LabInfo, count: number, zones: number, renew: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [LAB_BIN, 'fleet', '--instance', lab.instance, '--count', `${count}`, '--zones', `${zones}`, '--lease-renew', renew],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const ready = async () =>
    (await core.listNode({ labelSelector: FLEET_LABEL })).items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    ).length;
  await until(`${count} fleet nodes Ready`, async () => child.exitCode === null && (await ready()) === count, 300_000, 2000);
  return child;
}

describe(`eviction-forecast at scale against the real controller (Kubernetes ${LAB_VERSION})`, () => {
  it(`${NODES} nodes in ${SHAPE.zones} zones, one partially disrupted, one with a few silent nodes: every taint and first eviction forecast, none late`, async () => {
    await labDown(INSTANCE);
    const nodes = NODES - SHAPE.fleet;
    const started = realClock.now();
    const binaries = await labBinaries();
    const lab: LabInfo = await labUp({
      binaries,
      instance: INSTANCE,
      nodes,
      zones: SHAPE.zones,
      grace: SHAPE.grace,
      monitorPeriod: SHAPE.monitor,
      leaseRenew: SHAPE.renew,
      toleration: `${TOLERATION_MS / 1000}s`,
      evictionRate: SHAPE.rates[0],
      secondaryEvictionRate: SHAPE.rates[1],
      unhealthyZoneThreshold: SHAPE.unhealthy,
      largeClusterSizeThreshold: SHAPE.largeCluster,
      replicas: nodes,
      readyTimeoutMs: Math.max(240_000, nodes * 600),
    });
    const fleet = SHAPE.fleet ? await startFleet(lab, SHAPE.fleet, SHAPE.zones, SHAPE.renew) : undefined;
    const upSeconds = (realClock.now() - started) / 1000;
    const usageFrom = { at: realClock.now(), usage: labUsage(lab.stateDir, fleet?.pid) };
    const inZone = (zone: string) => lab.nodes.filter((n) => n.zone === zone).map((n) => n.name);
    const silent = [...inZone('zone-a').slice(0, SHAPE.silentA), ...inZone('zone-b').slice(0, SHAPE.silentB)];

    const { ctx, close } = await labContext(lab);
    const observed = new Observed(ctx);
    const recorder = new ControllerRecorder(ctx, lab);
    const traits = traitsOf(parseKubeVersion(binaries.version));
    const pump = (async () => {
      for await (const r of probe.start(ctx, probe.meta.params.parse({ margin: '5m' }))) observed.readings.push(r);
    })();
    try {
      await until('a first forecast', () => observed.readings.some((r) => r.status === 'ok'), 60_000, 500);
      // the kubelets stop one after another, a second apart: the order they went silent in is known
      const recordFrom = realClock.now();
      await recorder.stop(silent, 1000);
      // zone-a's backlog at the secondary rate (1.20: and the tokens its leftover entries take), a toleration and a pass more
      const backlogMs = (SHAPE.silentA / SHAPE.rates[1]) * 1000 * (traits.requeuesEveryPass ? 1 : 2);
      const waited = await until(
        'every silent node tainted and its pods evicted',
        () => silent.every((n) => observed.tainted.has(n) && observed.firstEviction(n) !== undefined),
        40_000 + backlogMs + 120_000,
        500,
      );

      const late: string[] = [];
      const unforeseen: string[] = [];
      let spread = 0;
      for (const name of silent) {
        const taint = observed.tainted.get(name)!;
        const eviction = observed.firstEviction(name)!;
        const before = (at: number) =>
          observed.readings.filter((r) => r.value && r.at < at).map((r) => ({ at: r.at, v: r.value as Value }));
        const taints = before(taint)
          .map(({ at, v }) => ({ at, n: v.nodes.find((n) => n.name === name) }))
          .filter((x) => x.n?.taintAt !== undefined && !x.n.tainted);
        const evictions = before(eviction)
          .map(({ at, v }) => ({
            at,
            e: Math.min(...v.pods.filter((p) => p.node === name && p.evictAt !== undefined).map((p) => p.evictAt!)),
          }))
          .filter((x) => Number.isFinite(x.e));
        if (taints.length === 0) unforeseen.push(`taint of ${name}`);
        if (evictions.length === 0) unforeseen.push(`eviction on ${name}`);
        for (const t of taints)
          if (t.n!.taintAt! > taint)
            late.push(`${name}: taint forecast at ${new Date(t.at).toISOString()} for ${t.n!.taintAt! - taint} ms after it came`);
        for (const e of evictions)
          if (e.e > eviction)
            late.push(`${name}: eviction forecast at ${new Date(e.at).toISOString()} for ${e.e - eviction} ms after it came`);
        for (const t of taints) spread = Math.max(spread, (t.n!.taintLikely ?? t.n!.taintAt!) - t.n!.taintAt!);
      }
      // taints out of the order the kubelets stopped in, zone by zone
      let outOfOrder = 0;
      for (const zone of ['zone-a', 'zone-b']) {
        const order = silent.filter((n) => inZone(zone).includes(n));
        for (let i = 1; i < order.length; i++) if (observed.tainted.get(order[i]!)! < observed.tainted.get(order[i - 1]!)!) outOfOrder++;
      }
      const usage = labUsage(lab.stateDir, fleet?.pid);
      const seconds = (realClock.now() - usageFrom.at) / 1000;
      const coresByProgram = Object.fromEntries(
        Object.entries(cpuBetween(usageFrom.usage, usage)).map(([k, v]) => [k, Number((v / seconds).toFixed(2))]),
      );
      const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
      const summary = {
        nodes: NODES,
        fleet: SHAPE.fleet,
        lab: {
          cores: Number(sum(coresByProgram).toFixed(2)),
          mib: Math.round(sum(usage.rssMiB)),
          processes: usage.processes,
          coresByProgram,
          mibByProgram: Object.fromEntries(Object.entries(usage.rssMiB).map(([k, v]) => [k, Math.round(v)])),
        },
        zones: SHAPE.zones,
        rates: SHAPE.rates,
        silent: silent.length,
        upSeconds,
        readings: observed.readings.length,
        tainted: silent.filter((n) => observed.tainted.has(n)).length,
        evicted: silent.filter((n) => observed.firstEviction(n) !== undefined).length,
        outOfOrder,
        late: late.length,
        worstLateMs: Math.max(0, ...late.map((l) => Number(/for (\d+) ms/.exec(l)?.[1] ?? 0))),
        maxSpreadMs: spread,
        taintsOnHealthy: [...observed.tainted.keys()].filter((n) => !silent.includes(n)).length,
      };
      console.log(`forecast-scale ${JSON.stringify(summary)}`);
      expect(unforeseen, 'taints and evictions with no forecast before them').toEqual([]);
      expect(late, 'forecasts later than the controller').toEqual([]);
      // the forecast said the likely moment apart from the bound; whether the controller handed zone-a's backlog out of
      // the kubelets' order (a release that re-queues every pass) depends on when its passes fell, so the count is
      // printed, not required: forecasts that are never late are the claim, in either order
      expect(spread).toBeGreaterThan(0);
      expect(summary.taintsOnHealthy).toBe(0);

      // the record against the model: the stand-in taints and evicts what the controller did, the forecast is never
      // later than the record; recorded until every pod of the tainted nodes has had its toleration and a pass more
      await realClock.sleep(TOLERATION_MS + 2 * lab.settings.nodeMonitorPeriod + 2000);
      const trace = await recorder.trace({
        release: `v${binaries.version}`,
        scenario: 'two-zones',
        settings: labLifecycleSettings(lab),
        start: recordFrom,
      });
      const judged = judgeTrace(trace);
      const kept = await keepTrace(trace);
      console.log(
        `controller trace ${JSON.stringify({ recordedSeconds: waited / 1000, queued: trace.observed.queued.length, taints: trace.observed.taints.length, retaints: judged.retaints, retaintsExplained: judged.retaintsExplained, taintFailures: trace.observed.taintFailures?.length, retainted: [...new Set(trace.observed.taints.map((t) => t.node).filter((n, i, all) => all.indexOf(n) !== i))], evictions: judged.evicted.length, zoneStates: trace.observed.zoneStates.length, readings: judged.readings, simRetaints: judged.sim.map((x) => x.retaints), matching: `${judged.matching}/${judged.sim.length}`, short: judged.short.map((x) => `seed ${x.seed}: ${x.what}`), kept })}`,
      );
      expect(judged.tainted).toEqual([...silent].sort());
      expect(judged.evicted.length).toBeGreaterThan(0);
      expect(twoZoneDepartures(trace, judged), 'where the stand-in departs from the record').toEqual([]);
      expect(judged.late, 'forecasts from the record later than the record').toEqual([]);
      expect(judged.unforeseen).toEqual([]);
      // 1.20's leftover queue entries re-taint nodes, in the record and in the stand-in. 1.34's and 1.37's re-taint a
      // node only when the controller's log says why: a taint write that failed, or a monitor pass that listed the
      // node before its taint landed and queued it again (a long pass: at 1,000 nodes 6 of 58 nodes; the stand-in
      // does not model it, and the new timeAdded does not move the eviction the taint manager has scheduled)
      expect(judged.retaints - judged.retaintsExplained > 0, "re-taints the controller's log does not explain").toBe(
        !traits.requeuesEveryPass,
      );
      for (const x of judged.sim) expect(x.retaints > 0).toBe(!traits.requeuesEveryPass);
    } finally {
      fleet?.kill();
      await close(() => pump.catch(() => {}));
    }
  }, 2_400_000);
});
