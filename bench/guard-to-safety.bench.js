// Time from a guard's violation to the cluster being safe: for kubelet-partition (guard aborts → the partition is
// reverted) and apiserver-outage (guard remediates → the controller-manager is stopped, evictions frozen), both
// with their guards, on the lab. Times come from each run's report.json (the executor's own clock).
//
//   npm run build && node bench/guard-to-safety.bench.js      (root on Linux: it starts lab instance `gts`)
//   KUBE_RUNBOOK_BENCH_RUNS=3                                  (runs of each runbook; default 2)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureLabBinaries, labDown, labUp } from '../packages/lab/dist/index.js';

const RUNS = Number(process.env.KUBE_RUNBOOK_BENCH_RUNS ?? 2);
const INSTANCE = 'gts';
const CLI = fileURLToPath(new URL('../bin/kube-runbook.js', import.meta.url));
const LAB_CLI = fileURLToPath(new URL('../packages/lab/bin/kube-runbook-lab.js', import.meta.url));
const RUNBOOKS = fileURLToPath(new URL('../runbooks/', import.meta.url));
const log = { debug() {}, info() {}, warn: (m) => console.error(m), error: (m) => console.error(m) };

function run(lab, runbook) {
  const dir = mkdtempSync(join(tmpdir(), 'kr-gts-'));
  const r = spawnSync(process.execPath, [CLI, 'run', join(RUNBOOKS, runbook), '-i', lab.inventoryFile, '--yes', '--report-dir', dir], {
    encoding: 'utf8',
    timeout: 900_000,
  });
  if (r.status !== 0 && r.status !== 1) throw new Error(`${runbook} exited ${r.status}: ${r.stderr}`);
  return JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
}

function settle(lab) {
  for (let i = 0; i < 180; i++) {
    if (spawnSync(process.execPath, [LAB_CLI, 'status', '--instance', lab.instance], { encoding: 'utf8' }).status === 0) return;
    spawnSync('sleep', ['1']);
  }
  throw new Error('the lab did not settle');
}

const ms = (a, b) => Date.parse(b) - Date.parse(a);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

const binaries = await ensureLabBinaries({ log });
await labDown(INSTANCE);
const lab = await labUp({ instance: INSTANCE, nodes: 3, binaries, log });
const rows = [];
const loads = [];
try {
  for (const [runbook, what] of [
    ['kubelet-partition.yaml', 'abort → partition reverted'],
    ['apiserver-outage.yaml', 'remediate → controller-manager stopped'],
  ]) {
    const safeAfter = [];
    const evicted = [];
    for (let i = 0; i < RUNS; i++) {
      settle(lab);
      loads.push(loadavg()[0]);
      const report = run(lab, runbook);
      const fired = report.guardFirings.find((g) => g.response === 'abort' || g.response === 'remediate');
      if (!fired) throw new Error(`${runbook}: no guard fired (${report.reason})`);
      const safe =
        fired.response === 'abort'
          ? report.faults
              .filter((f) => !f.remediation)
              .map((f) => f.revertedAt)
              .sort()
              .at(-1)
          : report.faults
              .filter((f) => f.remediation)
              .map((f) => f.appliedAt)
              .sort()
              .at(-1);
      safeAfter.push(ms(fired.at, safe));
      const deletions = report.observations['pods deleted']?.value?.count ?? NaN;
      evicted.push(deletions);
    }
    rows.push({ runbook, what, safeAfter, evicted });
  }
} finally {
  await labDown(INSTANCE);
}

console.log(`## Guard to safety: from a guard's violation to the fault reverted or evictions frozen

Command: \`npm run build && node bench/guard-to-safety.bench.js\` (bench/guard-to-safety.bench.js; ${RUNS} runs of each runbook
on lab instance ${INSTANCE}, 3 simulated nodes, lab timings). Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(
  totalmem() / 2 ** 30,
)} GiB, Node ${process.version}. Date: ${new Date().toISOString().slice(0, 10)}. 1-minute load average before the runs: ${loads
  .map((l) => l.toFixed(1))
  .join(', ')}.

| runbook | guard response | runs | violation → safe (median) | each run | pods deleted |
|---|---|---:|---:|---|---|
${rows
  .map(
    (r) =>
      `| ${r.runbook} | ${r.what} | ${r.safeAfter.length} | ${median(r.safeAfter)} ms | ${r.safeAfter.map((x) => `${x} ms`).join(', ')} | ${r.evicted.join(', ')} |`,
  )
  .join('\n')}
`);
