// Time of `kube-runbook-lab up --nodes 3` with cached binaries: from running the command to its return, when
// every node is Ready and every pod Running. The command is run as a user runs it (the built CLI, a new process)
// and the lab is torn down between runs.
//
//   npm run build && node bench/lab-up.bench.js          (root on Linux; `lab install` done once)
//   KUBE_RUNBOOK_BENCH_RUNS=5                             (runs; default 3)
//   KUBE_RUNBOOK_BENCH_CONTROL_PLANES="1 3"               (control-plane members to measure; default both)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const RUNS = Number(process.env.KUBE_RUNBOOK_BENCH_RUNS ?? 3);
const INSTANCE = 'bup';
const CLI = fileURLToPath(new URL('../packages/lab/bin/kube-runbook-lab.js', import.meta.url));

function kr(...args) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`kube-runbook-lab ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r;
}

const CONTROL_PLANES = (process.env.KUBE_RUNBOOK_BENCH_CONTROL_PLANES ?? '1 3').split(/\s+/).filter(Boolean).map(Number);
kr('down', '--instance', INSTANCE);
const rows = [];
const load = [];
for (const cps of CONTROL_PLANES) {
  const times = [];
  for (let i = 0; i < RUNS; i++) {
    load.push(loadavg()[0]);
    const t0 = performance.now();
    const r = kr('up', '--instance', INSTANCE, '--nodes', '3', '--control-planes', String(cps), '--json');
    times.push((performance.now() - t0) / 1000);
    const info = JSON.parse(r.stdout);
    if (info.nodes.filter((n) => n.roles.includes('worker')).length !== 3) throw new Error('expected 3 worker nodes');
    if (info.nodes.filter((n) => n.roles.includes('etcd')).length !== cps) throw new Error(`expected ${cps} etcd members`);
    kr('down', '--instance', INSTANCE);
  }
  rows.push([cps, [...times].sort((a, b) => a - b)]);
}
const f = (x) => x.toFixed(1);
console.log(`## Lab: \`lab up --nodes 3\` and \`--control-planes 3\` (cached binaries)

Command: \`npm run build && node bench/lab-up.bench.js\` (${RUNS} runs per row; each runs \`kube-runbook-lab up --instance ${INSTANCE} --nodes 3
--control-planes N\` as a new process and returns when 3 nodes are Ready and the 6 sample pods Running; \`lab down\` between runs).
With 3 members: a 3-member etcd, 3 apiservers, leader-elected controller-managers and schedulers, HAProxy as the VIP.
Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; date ${new Date().toISOString().slice(0, 10)};
1-minute load average at the start of each run: ${load.map((l) => l.toFixed(1)).join(', ')} (other labs may share the machine).

| control planes | runs | min | median | max | target |
|---:|---:|---:|---:|---:|---:|
${rows.map(([cps, sorted]) => `| ${cps} | ${RUNS} | ${f(sorted[0])} s | ${f(sorted[Math.floor(sorted.length / 2)])} s | ${f(sorted[sorted.length - 1])} s | < 60 s |`).join('\n')}
`);
