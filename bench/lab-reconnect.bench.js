// The lab brings every node back: a 200-node lab at the kubelet's and controller-manager's default timings (5 zones,
// lease renewed every 10 s, grace 40 s, monitor period 5 s, toleration 300 s), 18 kubelets stopped by `stop-kubelet`
// and held for 5 minutes, then the run's rollback starts them again. Counted from the run's report (each revert's
// time, the rollback complete or not) and from the apiserver (every node Ready, every Lease fresh), not from the
// simulator's own view. Runs KUBE_RUNBOOK_BENCH_RECONNECT_RUNS times (default 3) on one lab.
//
//   npm run build && node bench/lab-reconnect.bench.js      (root on Linux; `lab install --kubernetes-version 1.34` done once)
//   KUBE_RUNBOOK_BENCH_RECONNECT_VERSION=1.37              (another release; default 1.34)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../dist/core/clock.js';
import { waitFor } from '../dist/testing/wait.js';
import { ensureLabBinaries, labDown, labUp } from '../packages/lab/dist/index.js';

const RUNS = Number(process.env.KUBE_RUNBOOK_BENCH_RECONNECT_RUNS ?? 3);
const VERSION = process.env.KUBE_RUNBOOK_BENCH_RECONNECT_VERSION ?? '1.34';
const NODES = 200;
const ZONES = 5;
const STOPPED = 18;
const HOLD = '5m';
const INSTANCE = 'brc';
const CLI = fileURLToPath(new URL('../bin/kube-runbook.js', import.meta.url));
const log = { debug() {}, info() {}, warn: (m) => console.error(m), error: (m) => console.error(m) };

const RUNBOOK = `apiVersion: kube-runbook/v1
kind: Runbook
metadata:
  name: lab-reconnect
  description: Stop ${STOPPED} kubelets for ${HOLD}, then start them again; every node must come back.
spec:
  safety: {allowContexts: ["lab-*"], maxDuration: 20m, faultTtl: 15m, maxUnavailable: {worker: ${STOPPED}}}
  steps:
    - name: steady state
      expect: {probe: node-ready, with: {nodes: all}}
      within: 2m
    - name: stop kubelets across the zones
      action: stop-kubelet
      with: {nodes: {role: worker, count: ${STOPPED}}}
    - name: they stay down
      wait: ${HOLD}
  rollback:
    waitFor: {probe: node-ready, with: {nodes: all}}
    within: 5m
`;

/** From the apiserver: nodes Ready, and Leases renewed within their duration. */
async function census(kc) {
  const core = kc.makeApiClient(CoreV1Api);
  const coord = kc.makeApiClient(CoordinationV1Api);
  const nodes = (await core.listNode()).items;
  const ready = nodes.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
  const leases = (await coord.listNamespacedLease({ namespace: 'kube-node-lease' })).items;
  const now = realClock.now();
  const fresh = leases.filter(
    (l) => now - new Date(l.spec?.renewTime ?? 0).getTime() <= (l.spec?.leaseDurationSeconds ?? 40) * 1000,
  ).length;
  return { nodes: nodes.length, ready, fresh };
}

/** Every node Ready with a fresh Lease, before each run. */
const settle = (kc) =>
  waitFor(
    'every node Ready with a fresh Lease',
    async () => {
      const c = await census(kc);
      return c.ready === NODES && c.fresh === NODES;
    },
    300_000,
    1000,
  );

const ms = (a, b) => Date.parse(b) - Date.parse(a);

const binaries = await ensureLabBinaries({ log, kubernetesVersion: VERSION });
await labDown(INSTANCE);
const upAt = realClock.now();
const lab = await labUp({
  instance: INSTANCE,
  binaries,
  kubernetesVersion: VERSION,
  nodes: NODES,
  zones: ZONES,
  grace: '40s',
  monitorPeriod: '5s',
  leaseRenew: '10s',
  toleration: '300s',
  replicas: NODES,
  readyTimeoutMs: 300_000,
  log,
});
const upSeconds = (realClock.now() - upAt) / 1000;
const kc = new KubeConfig();
kc.loadFromFile(lab.kubeconfig);
const file = join(mkdtempSync(join(tmpdir(), 'kr-brc-')), 'lab-reconnect.yaml');
writeFileSync(file, RUNBOOK);
const rows = [];
let failed = 0;
try {
  for (let i = 0; i < RUNS; i++) {
    await settle(kc);
    const load = loadavg()[0];
    const dir = mkdtempSync(join(tmpdir(), 'kr-brc-'));
    const r = spawnSync(process.execPath, [CLI, 'run', file, '-i', lab.inventoryFile, '--yes', '--report-dir', dir], {
      encoding: 'utf8',
      timeout: 1_500_000,
    });
    const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
    const after = await census(kc);
    const faults = report.faults.filter((f) => f.action === 'stop-kubelet');
    const back = faults.filter((f) => f.revertedAt).map((f) => ms(report.rollback.startedAt, f.revertedAt));
    const row = {
      load,
      exit: r.status,
      status: report.status,
      complete: report.rollback?.complete,
      stopped: faults.length,
      reverted: faults.filter((f) => f.status === 'reverted').length,
      retried: faults.filter((f) => (f.attempts ?? 1) > 1).length,
      firstBack: Math.min(...back),
      lastBack: Math.max(...back),
      ...after,
    };
    rows.push(row);
    console.error(`run ${i + 1}: ${JSON.stringify(row)}${r.status === 0 ? '' : `\n${r.stderr.slice(-3000)}`}`);
    if (r.status !== 0 || row.ready !== NODES || row.fresh !== NODES || row.reverted !== STOPPED) failed++;
  }
} finally {
  await labDown(INSTANCE);
}

const s = (x) => `${(x / 1000).toFixed(1)} s`;
console.log(`## Lab: every node back after ${STOPPED} kubelets stopped for ${HOLD}, ${NODES} nodes

Command: \`npm run build && node bench/lab-reconnect.bench.js\` (bench/lab-reconnect.bench.js). One lab of ${NODES} simulated
nodes in ${ZONES} zones on Kubernetes ${binaries.version ?? VERSION} at the kubelet's and controller-manager's default timings (lease renewed
every 10 s, grace 40 s, monitor period 5 s, toleration 300 s; lab up took ${upSeconds.toFixed(0)} s), then ${RUNS} runs of a runbook that stops
${STOPPED} kubelets with \`stop-kubelet\` (their forwarders stopped: their simulators cut off), holds ${HOLD}, and rolls back
(each revert starts the forwarder and waits for the node's Lease to be renewed). "Ready" and "fresh Lease" are read
from the apiserver once the run has ended. Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB,
Node ${process.version}. Date: ${new Date().toISOString().slice(0, 10)}.

| run | load avg before | exit | run status | rollback complete | kubelets stopped / reverted | reverts retried | rollback start → first back | → last back | nodes Ready after | Leases fresh after |
|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|
${rows
  .map(
    (r, i) =>
      `| ${i + 1} | ${r.load.toFixed(1)} | ${r.exit} | ${r.status} | ${r.complete ? 'yes' : 'no'} | ${r.stopped} / ${r.reverted} | ${r.retried} | ${s(r.firstBack)} | ${s(r.lastBack)} | ${r.ready} / ${r.nodes} | ${r.fresh} / ${r.nodes} |`,
  )
  .join('\n')}
`);
process.exit(failed ? 1 : 0);
