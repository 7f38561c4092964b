// The run report's per-node history (src/report/nodes.ts, NodeTracker) fed the readings of a node-leases guard over a
// large fleet in a storm of renewals, each with the node facts node-leases declares of it (taken per reading, as the
// engine does, and timed with it): every reading lists every node's Lease age, and while thousands of Leases are
// stale each renewal that arrives is a reading of its own (the lab benchmark at 150,000 pods saw 50,000 of them in a
// 10-minute hold with 5,000 nodes lagging). N nodes, R readings 20 ms apart; a tenth of the nodes stale at a time, a
// few renewed between readings.
//
//   npm run build && node bench/report-nodes.bench.js
//   KUBE_RUNBOOK_BENCH_NODES=5000  KUBE_RUNBOOK_BENCH_READINGS=2000
//   KUBE_RUNBOOK_BENCH_REPORT_BESIDE=/path/to/another/build/dist/report/nodes.js   (judged side by side, taking turns;
//   a build whose probes declare no node facts is given the readings' values, which it read by their shape)
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { cpus, totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { quantile } from './parts/quantile.js';

const env = process.env;
const NODES = Number(env.KUBE_RUNBOOK_BENCH_NODES ?? 5000);
const READINGS = Number(env.KUBE_RUNBOOK_BENCH_READINGS ?? 2000);
const BESIDE = env.KUBE_RUNBOOK_BENCH_REPORT_BESIDE;
const START = Date.UTC(2026, 10, 1);
const LIMIT = 40_000;

/** A small seeded generator (mulberry32): every side gets the same readings. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The readings' values, as node-leases gives them: per node its Lease age and whether it is stale. */
function readings() {
  const r = random(7);
  const names = Array.from({ length: NODES }, (_, i) => `fleet-${String(i).padStart(5, '0')}`);
  // renewed every 10 s, a tenth of them lagging 45–60 s behind
  const renewed = names.map(() => START - Math.floor(r() * 10_000) - (r() < 0.1 ? 45_000 + Math.floor(r() * 15_000) : 0));
  const out = [];
  for (let k = 0; k < READINGS; k++) {
    const at = START + k * 20;
    for (let j = 0; j < 3; j++) renewed[Math.floor(r() * NODES)] = at - Math.floor(r() * 5000);
    const nodes = names.map((name, i) => {
      const ageMs = at - renewed[i];
      return { name, ageMs, stale: ageMs > LIMIT };
    });
    out.push({ at, value: { nodes, stale: nodes.filter((n) => n.stale).map((n) => n.name) } });
  }
  return out;
}

/** A build's NodeTracker, and what it is given of a reading: the facts node-leases declares, or the value itself. */
async function side(name, nodesJs) {
  const m = await import(pathToFileURL(nodesJs).href);
  const facts = (await import(pathToFileURL(resolve(dirname(nodesJs), '../probes/node-leases.js')).href)).default.meta.nodeFacts;
  return { name, m, given: facts ? (value) => ({ kinds: facts.kinds, facts: facts.of(value) }) : (value) => value };
}
const sides = [await side('this build', fileURLToPath(new URL('../dist/report/nodes.js', import.meta.url)))];
if (BESIDE) sides.push(await side(BESIDE, resolve(BESIDE)));
const all = readings();
const trackers = sides.map((s) => {
  const report = { nodes: [] };
  return { report, tracker: new s.m.NodeTracker(report) };
});
const times = sides.map(() => []);
for (let k = 0; k < all.length; k++) {
  // the sides take turns going first
  for (let j = 0; j < sides.length; j++) {
    const i = (k + j) % sides.length;
    const t0 = performance.now();
    trackers[i].tracker.reading('guard leases', 1, all[k].at, sides[i].given(all[k].value));
    times[i].push(performance.now() - t0);
  }
}
// both keep the same history
const shown = trackers.map(({ report: r }) => JSON.stringify({ nodes: r.nodes, nodesLeftOut: r.nodesLeftOut }));
if (shown.some((x) => x !== shown[0])) throw new Error('the builds kept different histories');

const rows = sides.map((s, i) => {
  const ts = times[i].sort((a, b) => a - b);
  return { name: s.name, p50: quantile(ts, 0.5), p99: quantile(ts, 0.99), total: ts.reduce((a, b) => a + b, 0) };
});
const fmt = (ms) => ms.toFixed(2);
console.log(`## The run report's node history: ${NODES.toLocaleString('en')} nodes' Lease ages a reading

Command: \`npm run build && node bench/report-nodes.bench.js\` (bench/report-nodes.bench.js). The report's per-node history
(src/report/nodes.ts) fed ${READINGS} node-leases readings of ${NODES} nodes each, 20 ms apart, a tenth of the Leases stale,
a few renewed between readings (a storm of renewals while thousands lag). Machine: ${cpus().length} × ${cpus()[0]?.model.trim()},
${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}. Date: ${new Date().toISOString().slice(0, 10)}.

| build | per reading p50 | p99 | all ${READINGS} readings | nodes shown |
|---|---:|---:|---:|---:|
${rows.map((r, i) => `| ${r.name}${i ? ` (${(r.p50 / rows[0].p50).toFixed(2)}× / ${(r.p99 / rows[0].p99).toFixed(2)}×)` : ''} | ${fmt(r.p50)} ms | ${fmt(r.p99)} ms | ${fmt(r.total)} ms | ${trackers[i].report.nodes.length} |`).join('\n')}
${BESIDE ? `\nBeside it, ${BESIDE}: its p50 and p99 in brackets as multiples of this build's; both kept the same history.\n` : ''}`);
