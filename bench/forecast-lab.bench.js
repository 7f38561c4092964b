// The eviction forecast against the real node lifecycle controller at full size: test/e2e/forecast-scale.test.ts
// with KUBE_RUNBOOK_FORECAST_SCALE=full (180 simulated nodes in 3 zones of 60, large-cluster threshold 50,
// unhealthy-zone threshold 0.25, rates 0.1/s and 0.05/s, toleration 15 s, lease renew 10 s, grace 40 s, monitor
// period 5 s; the kubelets of 18 zone-a nodes and 6 zone-b nodes stopped a second apart, zone-c healthy), run as a
// user runs the suite (vitest, the e2e project of the default release). The test fails on any forecast later than the
// controller; this prints what it measured. KUBE_RUNBOOK_BENCH_FORECAST_SIZE=large runs 1,000 nodes in 4 zones of 250
// instead (200 of `lab up`, 800 of `lab fleet`; 48 silent in zone-a, 10 in zone-b; unhealthy-zone threshold 0.15,
// rates 0.2/s and 0.1/s).
//
//   npm run build && node bench/forecast-lab.bench.js          (root on Linux; `lab install` done once; ~14 GiB free)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const load = loadavg()[0].toFixed(1);
const r = spawnSync('npx', ['vitest', 'run', '--project', 'e2e 1.37', 'test/e2e/forecast-scale.test.ts'], {
  cwd: root,
  encoding: 'utf8',
  env: { ...process.env, KUBE_RUNBOOK_FORECAST_SCALE: process.env.KUBE_RUNBOOK_BENCH_FORECAST_SIZE === 'large' ? 'large' : 'full' },
  timeout: 3_000_000,
});
// vitest colours its output: the summary is found by its words, codes taken out
// eslint-disable-next-line no-control-regex
const plain = `${r.stdout}\n${r.stderr}`.replace(/\x1b\[[0-9;]*m/g, '');
const line = plain.split('\n').find((l) => l.startsWith('forecast-scale {'));
if (!line) {
  console.error(`the scale test printed no summary (exit ${r.status}):\n${plain.split('\n').slice(-40).join('\n')}`);
  process.exit(1);
}
const s = JSON.parse(line.slice('forecast-scale '.length));
// a failed test: what failed, on stderr, beside its figures
if (r.status !== 0) {
  const lines = plain.split('\n');
  const from = lines.findIndex((l) => l.includes('Failed Tests'));
  console.error(lines.slice(from >= 0 ? from : -40, from >= 0 ? from + 40 : undefined).join('\n'));
}
const large = s.nodes > 180;
console.log(`## The eviction forecast against the real controller: ${s.nodes} nodes, ${s.zones} zones

Command: \`npm run build && ${large ? 'KUBE_RUNBOOK_BENCH_FORECAST_SIZE=large ' : ''}node bench/forecast-lab.bench.js\` (bench/forecast-lab.bench.js: test/e2e/forecast-scale.test.ts
at ${large ? 'its large' : 'full'} size). ${s.nodes} simulated nodes in ${s.zones} zones of ${s.nodes / s.zones} (${large ? '200 of `lab up`, 800 of `lab fleet`; ' : ''}large-cluster threshold 50, unhealthy-zone threshold
${large ? '0.15' : '0.25'}, rates ${s.rates[0]}/s and ${s.rates[1]}/s, toleration 15 s, lease renew 10 s, grace 40 s, monitor period 5 s); the kubelets of
${s.silent} nodes stopped a second apart (zone-a partially disrupted, a few in zone-b, the other zones healthy); the
eviction-forecast probe read every reading. Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, Kubernetes 1.37.2.
Date: ${new Date().toISOString().slice(0, 10)}. Test ${r.status === 0 ? 'passed' : `failed (exit ${r.status})`}; 1-minute load average before it: ${load}.

| nodes | silent | lab up | readings | tainted / evicted | taints out of stop order | forecasts later than the controller | worst | bound to likely, widest | lab CPU (per node) | lab memory (per node) |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| ${s.nodes} | ${s.silent} | ${s.upSeconds.toFixed(0)} s | ${s.readings} | ${s.tainted} / ${s.evicted} | ${s.outOfOrder} | ${s.late} | ${s.worstLateMs} ms | ${(s.maxSpreadMs / 1000).toFixed(0)} s | ${s.lab.cores} cores (${((s.lab.cores / s.nodes) * 1000).toFixed(2)} millicores) | ${s.lab.mib} MiB (${(s.lab.mib / s.nodes).toFixed(2)} MiB) |

The lab's CPU and memory are its ${s.lab.processes} processes' as /proc counts them (CPU from lab up to the last eviction,
averaged; resident memory then), by program: ${Object.entries(s.lab.coresByProgram)
  .sort((x, y) => y[1] - x[1])
  .map(([k, v]) => `${k} ${v} cores, ${s.lab.mibByProgram[k]} MiB`)
  .join('; ')}.
`);
process.exit(r.status === 0 ? 0 : 1);
