// The single executable's start-up (`npm run package`, linux-x64): the self-extracting executable shipped against the
// file it unpacks, which is the executable as it was shipped before (Node's binary with the blob injected), taking
// turns: `--version` (what shell completion pays on every TAB, Node's start and the CLI's) and `validate` of a
// runbook, each with the executable's pages dropped from the page cache (cold: GNU dd's nocache, for those files only)
// and right after (warm); then the first run, which unpacks into a new cache.
//
//   npm run package && node bench/single-executable.bench.js
//   KUBE_RUNBOOK_BENCH_RUNS=7
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { quantile } from './parts/quantile.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const RUNS = Number(process.env.KUBE_RUNBOOK_BENCH_RUNS ?? 7);
const shipped = join(root, 'build', 'kube-runbook-linux-x64');
const archive = `${shipped}.tar.gz`;
const runbook = join(root, 'runbooks', 'kubelet-partition.yaml');
const work = mkdtempSync(join(tmpdir(), 'kr-bench-sea-'));
const MiB = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/** Milliseconds EXE ARGS takes with the cache in CACHE, to its exit (which must be 0). */
function timed(exe, args, cache) {
  const start = performance.now();
  execFileSync(exe, args, { env: { PATH: process.env.PATH, KUBE_RUNBOOK_CACHE_DIR: cache }, stdio: 'ignore' });
  return performance.now() - start;
}

/** Drops FILES from the page cache (their pages only: the machine's other work keeps its own). */
const drop = (files) => {
  for (const f of files) execFileSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none']);
};

try {
  const load = loadavg()[0].toFixed(1);
  const first = [];
  for (let i = 0; i < Math.min(RUNS, 3); i++) {
    const cache = join(work, `first-${i}`);
    drop([shipped]);
    first.push(timed(shipped, ['--version'], cache));
  }
  const cache = join(work, 'first-0');
  const [sum] = readdirSync(join(cache, 'sea'));
  const unpacked = join(cache, 'sea', sum, 'kube-runbook');
  const sides = [
    { name: 'self-extracting (shipped)', exe: shipped, files: [shipped, unpacked] },
    { name: 'plain (as before, the file it unpacks)', exe: unpacked, files: [unpacked] },
  ];
  const times = new Map();
  const add = (key, ms) => times.set(key, [...(times.get(key) ?? []), ms]);
  for (let i = 0; i < RUNS; i++)
    for (const side of sides)
      for (const [what, args] of [
        ['--version', ['--version']],
        ['validate', ['validate', runbook]],
      ]) {
        drop(side.files);
        add(`${side.name}|${what}|cold`, timed(side.exe, args, cache));
        add(`${side.name}|${what}|warm`, timed(side.exe, args, cache));
      }
  const ms = (xs) => `${quantile(xs, 0.5).toFixed(0)} ms (${Math.min(...xs).toFixed(0)})`;
  const version = JSON.parse(readFileSync(join(root, 'node_modules', 'node', 'package.json'), 'utf8')).version;
  console.log(`## The single executable's start-up: self-extracting against plain (linux-x64)

Command: \`npm run package && node bench/single-executable.bench.js\` (bench/single-executable.bench.js; ${RUNS} runs of each,
the two taking turns; cold: the executables' pages dropped from the page cache first). Machine: ${cpus().length} × ${cpus()[0].model},
${Math.round(totalmem() / 2 ** 30)} GiB, Node v${version}. 1-minute load average at the start: ${load}. Date: ${new Date().toISOString().slice(0, 10)}.
Sizes: shipped ${MiB(statSync(shipped).size)} (archive ${MiB(statSync(archive).size)}), unpacked ${MiB(statSync(unpacked).size)}.

| executable | \`--version\` cold | \`--version\` warm | \`validate\` cold | \`validate\` warm |
| --- | ---: | ---: | ---: | ---: |
${sides
  .map(
    (s) =>
      `| ${s.name} | ${['--version', 'validate'].flatMap((w) => ['cold', 'warm'].map((c) => ms(times.get(`${s.name}|${w}|${c}`)))).join(' | ')} |`,
  )
  .join('\n')}

Median (minimum). The first run of a version, which unpacks into an empty cache and checks the sha256: ${ms(first)}.`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
