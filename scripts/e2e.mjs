// The lab end-to-end suites (vitest projects of vitest.config.ts): "e2e 1.37" in the foreground, and beside it, one
// after the other, "e2e 1.37 beside" (the default release's files that do not measure the controller's timing),
// "e2e 1.34" and "e2e 1.20". Each of the other releases is installed at the lowest CPU priority first (a build from
// the Go module proxy, or Debian's source package for 1.20, when the cache lacks it). A lab end-to-end test spends
// most of its time waiting for the controller's timers, so two suites share 2 cores without either one's timing
// suffering, and a machine with an empty cache builds the other releases while the default release's tests run.
// The other releases' labs have instance names of their own (test/e2e/helpers/lab.ts): nothing is shared but the
// machine.
//
// The side suites' output goes to test-results/e2e-<name>.log and is printed whole once the foreground suite has
// finished, so the two never interleave. The exit code is the first failure's, else 0.
//
//   node scripts/e2e.mjs                 every suite
//   node scripts/e2e.mjs "e2e 1.20"      one project, in the foreground
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MAIN = 'e2e 1.37';
/** Beside it, in this order: the default release's first (its binaries are the first built), then the others. */
const SIDE = [
  { project: 'e2e 1.37 beside', nice: 5 },
  { project: 'e2e 1.34', install: '1.34' },
  { project: 'e2e 1.20', install: '1.20' },
];
const repo = fileURLToPath(new URL('..', import.meta.url));
const vitest = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const cli = fileURLToPath(new URL('../bin/kube-runbook.js', import.meta.url));

/** Runs a program; stdio to the terminal, or to a file; resolves with its exit code (1 when it could not start). */
function run(argv, out) {
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: repo, stdio: out ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    if (out) {
      child.stdout.pipe(out, { end: false });
      child.stderr.pipe(out, { end: false });
    }
    child.on('error', (e) => {
      (out ?? process.stderr).write(`e2e: cannot start ${argv[0]}: ${e.message}\n`);
      resolve(1);
    });
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

const suite = (project, out, nice) =>
  run([...(nice ? ['nice', '-n', String(nice)] : []), process.execPath, vitest, 'run', '--project', project], out);
const seconds = (since) => Number((process.hrtime.bigint() - since) / 1_000_000_000n);

async function sideSuites() {
  mkdirSync(join(repo, 'test-results'), { recursive: true });
  const results = [];
  for (const s of SIDE) {
    const file = join(repo, 'test-results', `${s.project.replaceAll(' ', '-')}.log`);
    const out = createWriteStream(file);
    const started = process.hrtime.bigint();
    // `nice` is coreutils'; the installer's own children (go, apt-get) inherit the priority
    let code = s.install ? await run(['nice', '-n', '19', process.execPath, cli, 'lab', 'install', '--kubernetes-version', s.install], out) : 0;
    if (code === 0) code = await suite(s.project, out, s.nice);
    await new Promise((r) => out.end(r));
    results.push({ ...s, code, file, seconds: seconds(started) });
  }
  return results;
}

const only = process.argv[2];
if (only) {
  process.exitCode = await suite(only);
} else {
  const side = sideSuites();
  const started = process.hrtime.bigint();
  const main = await suite(MAIN);
  const mainSeconds = seconds(started);
  process.stdout.write(`\ne2e: ${MAIN} finished (exit ${main}) after ${mainSeconds}s; waiting for ${SIDE.map((s) => s.project).join(', ')}\n`);
  const results = await side;
  for (const r of results) {
    process.stdout.write(`\n──── ${r.project}${r.install ? ' (install included)' : ''}: ${r.file} ────\n`);
    process.stdout.write(readFileSync(r.file, 'utf8'));
  }
  process.stdout.write(`\ne2e: every suite done after ${seconds(started)}s\ne2e: ${MAIN}: exit ${main} after ${mainSeconds}s\n`);
  for (const r of results) process.stdout.write(`e2e: ${r.project}: exit ${r.code} after ${r.seconds}s${r.install ? ' (install included)' : ''}\n`);
  process.exitCode = [main, ...results.map((r) => r.code)].find((c) => c !== 0) ?? 0;
}
