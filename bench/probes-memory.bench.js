// The executor's memory at scale without a lab: the same cluster probes as bench/probes-scale.bench.js
// (bench/parts/probes-executor.js, in a process of its own) against a stand-in apiserver (bench/parts/fake-apiserver.js)
// with N nodes and P pods and a large cluster's churn (every Lease renewed every 10 s, every Node's status every
// minute, K pod deletions/s). Minutes instead of the lab's hour, on any machine; the lab benchmark stays the reference
// (a real apiserver, and client-go beside). Several executors run side by side in one run, one per set of Node
// flags, so the flags are compared under the same load.
//
//   npm run build && node bench/probes-memory.bench.js
//   KUBE_RUNBOOK_BENCH_NODES=5000  KUBE_RUNBOOK_BENCH_PODS="1000 30000 150000"  KUBE_RUNBOOK_BENCH_HOLD=2m
//   KUBE_RUNBOOK_BENCH_SILENT=500 (nodes that stop at the start of the hold; as many as KUBE_RUNBOOK_BENCH_NODES: every
//   node fails, an apiserver outage's aftermath, the eviction forecast's worst case)
//   KUBE_RUNBOOK_BENCH_LAG=0s (each renewal and status seen that long after it was written: a cluster behind its
//   kubelets, as a lab behind its fleet; past the 40 s lease duration, every Lease is stale when seen)
//   KUBE_RUNBOOK_BENCH_CHURN=10  KUBE_RUNBOOK_BENCH_NODE_FLAGS="|-- --semi-space-growth-factor=2"   (the default)
//   ('|' between sets; before `--` Node's flags, after it V8 flags the executor sets for itself after the CLI's
//   own heap setting, src/core/heap.ts; '' is the executor as the CLI runs)
//   KUBE_RUNBOOK_BENCH_EXECUTOR_BESIDE=/path/to/another/checkout (built: its executor runs beside, as the CLI runs)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../dist/core/duration.js';
import { fakeApiServer } from './parts/fake-apiserver.js';
import { measured } from './parts/measured.js';
import { quantile } from './parts/quantile.js';
import { scaleSettings } from './parts/scale-settings.js';

const env = process.env;
const { nodes: NODES, sizes: SIZES, churn: CHURN } = scaleSettings(env);
const HOLD = parseDuration(env.KUBE_RUNBOOK_BENCH_HOLD ?? '2m');
const SILENT = Number(env.KUBE_RUNBOOK_BENCH_SILENT ?? Math.round(NODES / 10));
const LAG = parseDuration(env.KUBE_RUNBOOK_BENCH_LAG ?? '0s');
// the executor's heap as the CLI sets it up (src/core/heap.ts), and with V8's default young generation growth
const FLAG_SETS = (env.KUBE_RUNBOOK_BENCH_NODE_FLAGS ?? '|-- --semi-space-growth-factor=2')
  .split('|')
  .map((s) => s.trim().split(/\s+/).filter(Boolean));
const EXECUTOR = fileURLToPath(new URL('parts/probes-executor.js', import.meta.url));
// another build's executor beside this one's (a checkout with its own `npm run build`), as the CLI runs
const BESIDE = env.KUBE_RUNBOOK_BENCH_EXECUTOR_BESIDE;
const RUNS = [
  ...FLAG_SETS.map((flags) => ({ flags, script: EXECUTOR, name: flags.length ? `\`${flags.join(' ')}\`` : 'as the CLI runs' })),
  ...(BESIDE ? [{ flags: [], script: resolve(BESIDE, 'bench/parts/probes-executor.js'), name: `the build in ${BESIDE}` }] : []),
];
const IDS = ['node-leases', 'node-ready', 'noexecute-taints', 'pod-deletions', 'eviction-forecast', 'endpoints-stability'];
const epochMs = () => performance.timeOrigin + performance.now();
const log = (m) => console.error(`[probes-memory ${new Date().toISOString().slice(11, 19)}] ${m}`);

/** `flags` before the script are Node's; after `--`, V8 flags the executor sets for itself at run time. */
function executor({ flags, script, name }, inventory, kubeconfig) {
  const split = flags.indexOf('--');
  const [node, runtime] = split < 0 ? [flags, []] : [flags.slice(0, split), flags.slice(split + 1)];
  return measured(`the executor (${name})`, process.execPath, [...node, script, inventory, kubeconfig, 'bench', ...runtime]);
}

async function measure(pods) {
  const api = fakeApiServer({ nodes: NODES, pods, lagMs: LAG });
  const server = await api.listen();
  const dir = mkdtempSync(join(tmpdir(), 'kr-probes-memory-'));
  try {
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'bench', cluster: { server } }],
        users: [{ name: 'bench', user: { token: 'bench' } }],
        contexts: [{ name: 'bench', context: { cluster: 'bench', user: 'bench' } }],
        'current-context': 'bench',
      }),
    );
    const inventory = join(dir, 'inventory.yaml');
    writeFileSync(
      inventory,
      [
        'apiVersion: kube-runbook/v1',
        'kind: Inventory',
        'metadata: {name: probes-memory}',
        'spec:',
        '  layout: kubeadm',
        '  kubeconfig: kubeconfig',
        '  context: bench',
        '  transport: {type: local}',
        '  controller: {nodeMonitorGracePeriod: 40s, nodeMonitorPeriod: 5s, defaultTolerationSeconds: 300, leaseDuration: 40s}',
        '  nodes:',
        '    - {name: fleet-00000, roles: [control-plane, worker], zone: zone-a}',
        '',
      ].join('\n'),
    );
    const started = epochMs();
    const exs = RUNS.map((run) => executor(run, inventory, kubeconfig));
    const first = new Map();
    while (first.size < exs.length) {
      if (epochMs() - started > 600_000) throw new Error(`the probes did not all read within 10 minutes at ${pods} pods`);
      await sleep(1000);
      const waiting = [];
      for (const [k, e] of exs.entries()) {
        if (first.has(k)) continue;
        const s = await e.stats();
        if (IDS.every((id) => s.firstReadingMs[id] !== undefined)) first.set(k, s);
        else
          waiting.push(
            `${RUNS[k].name}: ${IDS.filter((id) => s.firstReadingMs[id] === undefined)
              .map((id) => `${id} (${s.readings[id]?.detail ?? 'no reading'})`)
              .join(', ')}`,
          );
      }
      if (waiting.length && Math.round((epochMs() - started) / 1000) % 15 === 0)
        log(`waiting for the first readings of ${waiting.join('; ')}`);
    }
    await sleep(5000);
    const synced = await Promise.all(exs.map((e) => e.stats()));
    log(
      `${pods} pods: ${synced.map((s, k) => `${RUNS[k].name} ${s.rssMiB.toFixed(0)} MiB (heap ${s.heapMiB.toFixed(0)})`).join(', ')} after the initial lists`,
    );
    // the churn starts now: pod deletions (the leases and nodes churn from the start), and SILENT nodes stop, so
    // that the eviction forecast has failing nodes to judge
    api.churn(CHURN);
    api.silence(SILENT);
    await sleep(HOLD);
    const end = await Promise.all(exs.map((e) => e.stats()));
    // what each holds: the heap after a full collection, asked for last (it changes what it measures)
    const live = await Promise.all(exs.map((e) => e.live()));
    const deletions = api.stats().deletions;
    const seen = exs.map((e) => e.deleted.size);
    // from the DELETED event sent to the reading of pod-deletions that counts it
    const delays = exs.map((e) => [...api.deletedAt].filter(([n]) => e.deleted.has(n)).map(([n, t]) => e.deleted.get(n) - t));
    await Promise.all(exs.map((e) => e.quit()));
    log(
      `${pods} pods: ${end.map((s, k) => `${RUNS[k].name} ${s.rssMiB.toFixed(0)} MiB`).join(', ')} at the end; unknown paths asked for: ${api.stats().unknownPaths.join(' ') || 'none'}`,
    );
    return { pods, first: [...exs.keys()].map((k) => first.get(k)), synced, end, live, deletions, seen, delays };
  } finally {
    api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const f1 = (x) => (x === null || x === undefined ? '–' : x.toFixed(1));
const f2 = (x) => (x === null || x === undefined ? '–' : x.toFixed(2));

function report(rows) {
  console.log(`## The executor's memory at scale, against a stand-in apiserver: ${NODES} nodes, ${SIZES.join(' / ')} pods

Command: \`npm run build && node bench/probes-memory.bench.js\` (bench/probes-memory.bench.js; KUBE_RUNBOOK_BENCH_NODE_FLAGS
${JSON.stringify(env.KUBE_RUNBOOK_BENCH_NODE_FLAGS ?? '')}). The executor's cluster probes (bench/parts/probes-executor.js, as in the lab benchmark)
against bench/parts/fake-apiserver.js: ${NODES} nodes in 3 zones and their Leases, pods with the fields a real apiserver
returns; churn: every Lease renewed every 10 s (${Math.round(NODES / 10)}/s), every Node status every minute, and during the
${f1(HOLD / 60_000)}-minute hold ${CHURN} pod deletions/s, each replaced, and ${SILENT} nodes spread over the zones stop renewing
their Leases and posting status (the eviction forecast judges failing nodes; the controller settings say grace 40 s)${LAG ? `; every renewal and status is written ${f1(LAG / 1000)} s in the past, as a cluster sees its kubelets that late` : ''}. One executor per set of Node flags, side by side.
Deletion delay: from the DELETED event sent to pod-deletions' reading that counts it.
Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}. Date: ${new Date().toISOString().slice(0, 10)}.

| pods | executor | RSS after lists | heap after lists | RSS at end of hold | heap at end | heap live at end | peak RSS | CPU over the hold | last first reading | lease delay p99 | forecast judgement p50 / p99 / max | its CPU time p50 / p99 / max | CPU per event p50 / p99 | deletions seen | deletion delay p50 / p99 |
|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows
  .flatMap((r) =>
    r.synced.map((s, k) => {
      const e = r.end[k];
      const cpu = e.cpuSeconds - s.cpuSeconds;
      const j = e.judgeMs['eviction-forecast'];
      return `| ${r.pods} | ${RUNS[k].name} | ${f1(s.rssMiB)} MiB | ${f1(s.heapMiB)} MiB | ${f1(e.rssMiB)} MiB | ${f1(e.heapMiB)} MiB | ${f1(r.live[k].heapMiB)} MiB | ${f1(e.peakRssMiB)} MiB | ${f1(cpu)} s (${f1((cpu / (HOLD / 1000)) * 100)} %) | ${f1(Math.max(...Object.values(r.first[k].firstReadingMs)) / 1000)} s | ${f1(e.leaseDelayMs.p99)} ms | ${f1(j.p50)} / ${f1(j.p99)} / ${f1(j.max)} ms (${j.n}×) | ${f1(j.cpu.p50)} / ${f1(j.cpu.p99)} / ${f1(j.cpu.max)} ms | ${j.cpuPerChange ? `${f2(j.cpuPerChange.p50)} / ${f2(j.cpuPerChange.p99)} ms (${j.cpuPerChange.n})` : '–'} | ${r.seen[k]}/${r.deletions} | ${f1(quantile(r.delays[k], 0.5))} / ${f1(quantile(r.delays[k], 0.99))} ms |`;
    }),
  )
  .join('\n')}
`);
}

const rows = [];
let failure;
try {
  for (const pods of SIZES) rows.push(await measure(pods));
} catch (e) {
  log(`stopped: ${e.message}`);
  failure = e;
}
report(rows);
process.exit(failure ? 1 : 0);
