// The eviction forecast's judgement on its own (src/forecast/forecast.ts), as the probe calls it: a fleet of N nodes in 3
// zones of which F are failing (silent, NotReady or tainted; the rest passed as counts per zone) and handed in columns
// as the probe's feed hands them, their pods too (builds from before that: as objects), in memory kept from one
// judgement to the next as the probe keeps it (in the feed's store; builds from before that: on the nodes, or made anew
// by each judgement), 30 pods on each node in 3 workloads' tolerations, the first 20 pods to be evicted and the first
// 100 nodes kept (builds from before nodesKept report every node, and from before evictedPodsOnly keep pods not evicted
// too). Each size is judged J times with the clock moving 250 ms between judgements (the probe judges at most 4 times
// a second), after a warm-up; garbage collections during the timed judgements are counted in.
//
//   npm run build && node bench/forecast.bench.js
//   KUBE_RUNBOOK_BENCH_NODES=5000  KUBE_RUNBOOK_BENCH_FAILING="500 1500 2500 5000"  KUBE_RUNBOOK_BENCH_JUDGEMENTS=500
//   KUBE_RUNBOOK_BENCH_COLD=64 (MiB read through before each judgement, outside the time taken, so that the fleet's
//       memory is out of the processor's caches as in the executor, where watch events go through the heap between
//       two judgements; 0: judged with the caches warm from the judgement before)
//   KUBE_RUNBOOK_BENCH_FORECAST_BESIDE=/path/to/another/build/dist/forecast/forecast.js
//       (another build's forecast, judged side by side: the two take turns on the same fleets and moments; it is
//       given the pods both as one list of groups and per node, so that builds from before `podsOn` take them too)
//
// Prints its section of BENCHMARKS.md.
import { cpus, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { groupPods } from '../dist/forecast/forecast.js';
import { NOT_READY, UNREACHABLE } from '../dist/kube/tolerations.js';
import { parseKubeVersion, versionDefaults } from '../dist/kube/versions.js';
import { quantile } from './parts/quantile.js';

const env = process.env;
const NODES = Number(env.KUBE_RUNBOOK_BENCH_NODES ?? 5000);
const FAILING = (env.KUBE_RUNBOOK_BENCH_FAILING ?? '500 1500 2500 5000').split(/\s+/).filter(Boolean).map(Number);
const JUDGEMENTS = Number(env.KUBE_RUNBOOK_BENCH_JUDGEMENTS ?? 500);
const WARM_UP = 100;
const COLD_MIB = Number(env.KUBE_RUNBOOK_BENCH_COLD ?? 64);
// read through before each judgement: a buffer larger than the processor's last-level cache
const COLD = new Float64Array((COLD_MIB * 2 ** 20) / 8);
const coolCaches = () => {
  // one write per 64-byte cache line
  for (let i = 0; i < COLD.length; i += 8) COLD[i]++;
};
const BESIDE = env.KUBE_RUNBOOK_BENCH_FORECAST_BESIDE;
const ZONES = ['zone-a', 'zone-b', 'zone-c'];
const NOW = Date.UTC(2026, 10, 1);
// kube-controller-manager's defaults on 1.37
const SETTINGS = versionDefaults(parseKubeVersion('v1.37.2'));
const SILENT_AFTER = 20_000;
// three workloads' tolerations, each one array shared by its pods (resources.ts interns them)
const TOLERATIONS = [
  [
    { key: NOT_READY, operator: 'Exists', effect: 'NoExecute', seconds: 300 },
    { key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', seconds: 300 },
  ],
  [
    { key: NOT_READY, operator: 'Exists', effect: 'NoExecute', seconds: 60 },
    { key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', seconds: 60 },
  ],
  [{ operator: 'Exists' }],
];

/** A seeded generator (mulberry32): the same fleet on every run. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * F failing nodes out of NODES: most silent for 20–50 s and still Ready (what a zone's outage looks like in its first
 * minute), a fifth already Unknown, half of those tainted, a few reporting Ready=False.
 */
function fleet(failing) {
  const r = random(failing);
  const nodes = [];
  const pods = [];
  for (let i = 0; i < failing; i++) {
    const name = `node-${String(i).padStart(5, '0')}`;
    const zone = ZONES[i % ZONES.length];
    const beat = NOW - SILENT_AFTER - 1 - Math.floor(r() * 30_000);
    const kind = r();
    const node = { name, zone, created: NOW - 86_400_000, leaseRenew: beat, taints: [] };
    if (kind < 0.75) node.ready = { status: 'True', heartbeat: beat, transition: NOW - 86_400_000 };
    else if (kind < 0.95) {
      const transition = beat + SETTINGS.nodeMonitorGracePeriodMs;
      node.ready = { status: 'Unknown', heartbeat: beat, transition };
      if (r() < 0.5) node.taints = [{ key: UNREACHABLE, effect: 'NoExecute', timeAdded: transition }];
    } else node.ready = { status: 'False', heartbeat: NOW - 1000, transition: NOW - Math.floor(r() * 60_000) };
    nodes.push(node);
    for (let k = 0; k < 30; k++)
      pods.push({
        key: `default/${name}-${String(k).padStart(2, '0')}`,
        node: name,
        tolerations: TOLERATIONS[k < 24 ? 0 : k < 29 ? 1 : 2],
      });
  }
  const groups = groupPods(pods);
  const byNode = new Map();
  for (const g of groups) byNode.set(g.node, [...(byNode.get(g.node) ?? []), g]);
  const healthy = new Map(ZONES.map((z, i) => [z, Math.floor((NODES - failing + ZONES.length - 1 - i) / ZONES.length)]));
  // a node's pods held by the node, as the probe's feed holds them (builds from before that are given its name)
  for (const node of nodes) Object.defineProperty(node, 'pods', { value: byNode.get(node.name) ?? [], enumerable: false });
  const podsOn = (node) => (typeof node === 'string' ? (byNode.get(node) ?? []) : node.pods);
  return { nodes, healthy, groups, podsOn };
}

let gcMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcMs += e.duration;
}).observe({ entryTypes: ['gc'] });

/**
 * A build's forecast as the probe calls it: with the nodes and their pods in columns, as the feed hands them (made
 * once per fleet, outside the time taken, as the feed keeps them), where the build takes them; else as objects.
 */
function sideOf(name, m) {
  // the judging memory the probe's feed keeps for its fleet, where the build takes it (builds from before that keep
  // it on the nodes themselves)
  if (m.ForecastStore)
    return {
      name,
      fleet: (nodes) => ({ nodes, store: new m.ForecastStore() }),
      judge: ({ nodes, ...input }) => m.forecast({ ...input, nodes: nodes.nodes }, nodes.store),
    };
  if (!m.forecastColumns) return { name, judge: (input) => m.forecast(input), fleet: (nodes) => nodes };
  if (m.podColumnsOf) {
    // the memory the probe keeps from one judgement to the next, where the build takes it
    const scratch = m.ForecastScratch ? new m.ForecastScratch() : undefined;
    return {
      name,
      fleet: (nodes) => ({ columns: m.columnsOf(nodes), pods: m.podColumnsOf(nodes.length, (i) => nodes[i].pods) }),
      judge: ({ nodes, ...input }) => m.forecastColumns({ ...input, nodes: nodes.columns, pods: nodes.pods, scratch }),
    };
  }
  return {
    name,
    fleet: (nodes) => ({ columns: m.columnsOf(nodes), pods: nodes.map((n) => n.pods) }),
    judge: ({ nodes, ...input }) => m.forecastColumns({ ...input, nodes: nodes.columns, podsOn: (i) => nodes.pods[i] }),
  };
}
const sides = [sideOf('this build', await import('../dist/forecast/forecast.js'))];
if (BESIDE) sides.push(sideOf(BESIDE, await import(pathToFileURL(resolve(BESIDE)).href)));

const rows = [];
for (const failing of FAILING) {
  const { nodes: objects, healthy, groups, podsOn } = fleet(failing);
  const given = sides.map((side) => side.fleet(objects));
  const times = sides.map(() => []);
  const atRisk = sides.map(() => 0);
  let gcBefore = 0;
  let timed = 0;
  for (let j = 0; j < WARM_UP + JUDGEMENTS; j++) {
    if (j === WARM_UP) gcBefore = gcMs;
    const now = NOW + j * 250;
    // the sides take turns going first
    for (let k = 0; k < sides.length; k++) {
      const i = (j + k) % sides.length;
      if (COLD_MIB > 0) coolCaches();
      const t0 = performance.now();
      const f = sides[i].judge({
        now,
        settings: SETTINGS,
        nodes: given[i],
        healthy,
        pods: groups,
        podsOn,
        silentAfterMs: SILENT_AFTER,
        controllerRunning: true,
        taintsInTheSamePass: true,
        podsKept: 20,
        evictedPodsOnly: true,
        nodesKept: 100,
      });
      const ms = performance.now() - t0;
      if (j >= WARM_UP) {
        times[i].push(ms);
        timed += ms;
      }
      atRisk[i] = f.atRisk;
    }
  }
  // the last collections are reported after the loop
  await sleep(20);
  const gcShare = (gcMs - gcBefore) / timed;
  sides.forEach((side, i) => {
    const ts = times[i].sort((a, b) => a - b);
    rows.push({
      failing,
      side: side.name,
      atRisk: atRisk[i],
      p50: quantile(ts, 0.5),
      p99: quantile(ts, 0.99),
      max: ts[ts.length - 1],
      perNodeUs: (1000 * quantile(ts, 0.5)) / failing,
      gcShare,
    });
  });
}

const fmt = (ms) => ms.toFixed(2);
console.log(`## The eviction forecast's judgement: ${NODES.toLocaleString('en')} nodes, failing ones judged

Command: \`npm run build && node bench/forecast.bench.js\` (bench/forecast.bench.js). src/forecast/forecast.ts as the
eviction-forecast probe calls it, on one thread and nothing else: ${NODES} nodes in ${ZONES.length} zones, the failing ones
passed (three quarters silent 20–50 s and still Ready, a fifth Unknown, half of those tainted, the rest Ready=False),
the others as counts per zone; 30 pods per node in three workloads' tolerations; the first 20 pods to be evicted and 100 nodes kept.
${JUDGEMENTS} judgements per size, the clock 250 ms further each time, after ${WARM_UP} to warm up; garbage
collections during them counted in; ${COLD_MIB > 0 ? `before each judgement ${COLD_MIB} MiB read through outside the time taken, so that it starts with the processor's caches cold, as in the executor` : 'each judgement starts with the caches warm from the one before'}. Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}.
Date: ${new Date().toISOString().slice(0, 10)}.

| failing nodes | forecast | pods on them (at risk) | judgement p50 | p99 | max | p50 per failing node | time in GC |
|---:|---|---:|---:|---:|---:|---:|---:|
${rows
  .map((r) => {
    const mine = rows.find((x) => x.failing === r.failing && x.side === 'this build');
    const vs = r === mine ? '' : ` (${(r.p50 / mine.p50).toFixed(2)}× / ${(r.p99 / mine.p99).toFixed(2)}×)`;
    return `| ${r.failing} | ${r.side}${vs} | ${r.failing * 30} (${r.atRisk}) | ${fmt(r.p50)} ms | ${fmt(r.p99)} ms | ${fmt(r.max)} ms | ${r.perNodeUs.toFixed(2)} µs | ${(100 * r.gcShare).toFixed(0)} % |`;
  })
  .join('\n')}
${BESIDE ? `\nBeside it, ${BESIDE}: its p50 and p99 in brackets as multiples of this build's; time in GC is the two's together.\n` : ''}
`);
