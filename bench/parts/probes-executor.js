// The executor's side of bench/probes-scale.bench.js: the cluster probes a large game day guards with, on the
// executor's shared watches, in a process of their own so that its memory and CPU are theirs. Each reading goes to
// a report collector as a run's guard readings do (report.json keeps them), so the report's memory is counted too. It speaks the same
// protocol as bench/baselines/informer (one command per line on stdin, one JSON line per answer on stdout):
//
//   stats   memory, CPU, each probe's first reading, lease delays and judgement times (and their CPU time per watch
//           change judged) since the last stats, the shared watches' counters, how many nodes the eviction forecast
//           judged failing per reading
//   mem     memory only (resets nothing): the benchmark samples it through the hold
//   live    memory after a full garbage collection (what the process holds; asked for once, at the end)
//   quit    stops the probes and exits
//
// and prints {"ev":"pod-deleted","name":"ns/name","at":ms} when pod-deletions' reading counts a deletion.
//
//   node bench/parts/probes-executor.js INVENTORY KUBECONFIG CONTEXT [V8-FLAG...]
import { createInterface } from 'node:readline';
import { runInNewContext } from 'node:vm';
import v8 from 'node:v8';
import { performance } from 'node:perf_hooks';
import { realClock } from '../../dist/core/clock.js';
import { tuneHeap } from '../../dist/core/heap.js';
import { watchSpecs } from '../../dist/kube/resources.js';
import { ReportCollector } from '../../dist/report/collect.js';
import { benchCtx } from './bench-ctx.js';
import endpointsStability from '../../dist/probes/endpoints-stability.js';
import evictionForecast from '../../dist/probes/eviction-forecast.js';
import nodeLeases from '../../dist/probes/node-leases.js';
import nodeReady from '../../dist/probes/node-ready.js';
import noexecuteTaints from '../../dist/probes/noexecute-taints.js';
import podDeletions from '../../dist/probes/pod-deletions.js';
import { quantile } from './quantile.js';

const [inventoryFile, kubeconfig, context, ...v8Flags] = process.argv.slice(2);
// the heap as the CLI sets it up (src/core/heap.ts), then V8 flags given after the context (the benchmarks compare
// settings with them: `--semi-space-growth-factor=2` is V8's default)
tuneHeap();
for (const f of v8Flags) v8.setFlagsFromString(f);
const epochMs = () => performance.timeOrigin + performance.now();
const print = (v) => process.stdout.write(`${JSON.stringify(v)}\n`);

const GUARDS = [
  { probe: nodeLeases, params: { staleAfter: '60s' } },
  { probe: nodeReady, params: { allowNotReady: 1_000_000 } },
  { probe: noexecuteTaints, params: { max: 1_000_000 } },
  { probe: podDeletions, params: { max: 1_000_000 } },
  { probe: evictionForecast, params: { margin: '30s' } },
  { probe: endpointsStability, params: { max: 1_000_000 } },
];

const started = epochMs();
const { ctx: base, kube, abort } = await benchCtx({ inventoryFile, kubeconfig, context });

const report = new ReportCollector();
const firstReadingMs = {};
// Per judgement: wall-clock (waiting for a core included) and the process's CPU time (GC pauses included). Not the
// thread's own (process.threadCpuUsage): on kernels that account a running thread's time at the scheduler's tick, it
// moves in steps of the tick (4 ms at 250 Hz), so a judgement of 1 ms reads 0 or 4 ms; the process's is brought up to
// date for the calling thread when read, to the microsecond, and its other threads are seldom busy meanwhile.
const judgeMs = Object.fromEntries(GUARDS.map((g) => [g.probe.meta.id, []]));
const judgeCpuMs = Object.fromEntries(GUARDS.map((g) => [g.probe.meta.id, []]));
// per watch change a judgement took in: that judgement's CPU time shared among the changes it judged together
const changeCpuMs = Object.fromEntries(GUARDS.map((g) => [g.probe.meta.id, []]));
const last = {};
let deletionsCounted = 0;
// per eviction-forecast reading: the nodes it judged failing
let forecastFailing = [];

const pumps = GUARDS.map(({ probe, params }) => {
  const id = probe.meta.id;
  const profile = {
    judge(fn, changes) {
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      try {
        return fn();
      } finally {
        judgeMs[id].push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        const cpuMs = (c.user + c.system) / 1000;
        judgeCpuMs[id].push(cpuMs);
        for (let i = 0; i < changes; i++) changeCpuMs[id].push(cpuMs / changes);
      }
    },
  };
  const it = probe.start({ ...base, profile }, probe.meta.params.parse(params))[Symbol.asyncIterator]();
  return (async () => {
    for (;;) {
      const n = await it.next();
      if (n.done) return;
      const r = n.value;
      report.onEvent({
        type: 'guard-reading',
        at: r.at,
        guard: id,
        reading: r,
        armed: true,
        ...(probe.meta.nodeFacts ? { nodeFacts: probe.meta.nodeFacts } : {}),
      });
      last[id] = { status: r.status, detail: r.detail.slice(0, 160) };
      if (r.status !== 'unknown' && firstReadingMs[id] === undefined) firstReadingMs[id] = epochMs() - started;
      // how many nodes it judged failing (builds from before failingNodes listed them all)
      if (id === 'eviction-forecast' && Array.isArray(r.value?.nodes)) forecastFailing.push(r.value.failingNodes ?? r.value.nodes.length);
      if (id === 'pod-deletions' && r.value) {
        const at = epochMs();
        const { count, deletions } = r.value;
        const fresh = Math.min(count - deletionsCounted, deletions.length);
        for (const d of deletions.slice(deletions.length - fresh)) print({ ev: 'pod-deleted', name: d.pod, at });
        deletionsCounted = count;
      }
    }
  })();
});

// Lease renewals as the shared watch hands them to the probes: the same point client-go's handlers see them.
let leaseDelays = [];
const leaseDelayWindows = [];
const leases = kube.watches.watch(watchSpecs.nodeLeases());
const stores = { nodes: kube.watches.watch(watchSpecs.nodes()), leases, pods: kube.watches.watch(watchSpecs.pods()) };
leases.subscribe((c) => {
  if (c.type !== 'modified' || c.relist || c.object.renewTime === undefined) return;
  const at = epochMs();
  const delay = at - c.object.renewTime;
  leaseDelays.push(delay);
  // the largest delay in each 10 s, to see when delays came (kept for the whole run)
  const w = Math.floor((at - started) / 10_000);
  leaseDelayWindows[w] = Math.max(leaseDelayWindows[w] ?? 0, delay);
});

const MiB = 2 ** 20;
function memory() {
  const mem = process.memoryUsage();
  const h = v8.getHeapStatistics();
  return {
    rssMiB: mem.rss / MiB,
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
    heapMiB: mem.heapUsed / MiB,
    heapTotalMiB: mem.heapTotal / MiB,
    externalMiB: mem.external / MiB,
    arrayBuffersMiB: mem.arrayBuffers / MiB,
    mallocedMiB: h.malloced_memory / MiB,
  };
}

const cpu0 = process.cpuUsage();
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = line.trim();
  if (cmd === 'mem') print({ ev: 'mem', at: epochMs(), ...memory() });
  else if (cmd === 'live') {
    v8.setFlagsFromString('--expose-gc');
    runInNewContext('gc')();
    print({ ev: 'live', at: epochMs(), ...memory() });
  } else if (cmd === 'stats') {
    const cpu = process.cpuUsage(cpu0);
    const summary = (xs) => ({
      n: xs.length,
      p50: quantile(xs, 0.5),
      p99: quantile(xs, 0.99),
      max: xs.length ? xs.reduce((a, b) => Math.max(a, b)) : null,
    });
    const judgements = Object.fromEntries(
      Object.entries(judgeMs).map(([id, xs]) => [
        id,
        { ...summary(xs), cpu: summary(judgeCpuMs[id]), cpuPerChange: summary(changeCpuMs[id]) },
      ]),
    );
    for (const id of Object.keys(judgeMs)) {
      judgeMs[id] = [];
      judgeCpuMs[id] = [];
      changeCpuMs[id] = [];
    }
    const d = leaseDelays;
    leaseDelays = [];
    const failing = forecastFailing;
    forecastFailing = [];
    print({
      ev: 'stats',
      at: epochMs(),
      ...memory(),
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      firstReadingMs,
      readings: last,
      objects: Object.fromEntries(Object.entries(stores).map(([k, w]) => [k, w.store.size])),
      watches: kube.watches.keys(),
      leaseDelayMs: { n: d.length, p50: quantile(d, 0.5), p99: quantile(d, 0.99) },
      leaseDelayMaxPer10s: Array.from(leaseDelayWindows, (x) => Math.round(x ?? 0)),
      judgeMs: judgements,
      forecastFailing: summary(failing),
      readingsKept: Object.values(report.report.guardReadings).reduce((n, l) => n + l.length, 0),
      watchStats: Object.fromEntries(Object.entries(stores).map(([k, w]) => [k, { ...w.stats }])),
    });
  } else if (cmd === 'quit') break;
}
abort();
for (const w of Object.values(stores)) w.release();
await Promise.race([Promise.allSettled(pumps), new Promise((r) => realClock.setTimer(5000, r))]);
kube.watches?.close();
process.exit(0);
