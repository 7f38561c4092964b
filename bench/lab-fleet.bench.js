// Fleet mode: how many simulated nodes one process keeps Ready against the lab's real apiserver and
// controller-manager at the kubelet's default timings (lease renewed every 10 s, node-monitor-grace-period 40 s,
// node-monitor-period 5 s). For each size the fleet runs for a while; it "keeps them Ready" when every node
// was Ready and no node ever went not-Ready after that.
//
//   npm run build && node bench/lab-fleet.bench.js                 (root on Linux; `lab install` done once)
//   KUBE_RUNBOOK_BENCH_FLEET="500 1000 2000"  KUBE_RUNBOOK_BENCH_HOLD=150s
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

const SIZES = (process.env.KUBE_RUNBOOK_BENCH_FLEET ?? '1000 2000 3000').split(/\s+/).filter(Boolean).map(Number);
const HOLD = process.env.KUBE_RUNBOOK_BENCH_HOLD ?? '150s';
const INSTANCE = 'bfl';
const CLI = fileURLToPath(new URL('../packages/lab/bin/kube-runbook-lab.js', import.meta.url));

function kr(...args) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 1_800_000, maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) throw new Error(`kube-runbook-lab ${args.join(' ')} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return r;
}

kr('down', '--instance', INSTANCE);
kr('up', '--instance', INSTANCE, '--nodes', '0', '--no-workload', '--grace', '40s', '--monitor-period', '5s', '--lease-renew', '10s');
const rows = [];
try {
  for (const n of SIZES) {
    const load = loadavg()[0];
    const r = kr('fleet', '--instance', INSTANCE, '--count', String(n), '--zones', '3', '--duration', HOLD, '--json');
    const s = JSON.parse(r.stdout.trim().split('\n').pop());
    const kept = s.ready === n && s.flaps === 0 && s.steadyRenewalsPerSecond !== undefined;
    rows.push({ n, s, kept, load });
    console.error(`fleet ${n}: ${JSON.stringify(s)}`);
  }
} finally {
  kr('down', '--instance', INSTANCE);
}
const best = rows.filter((r) => r.kept).reduce((a, r) => Math.max(a, r.n), 0);
const ms = (x) => (x === undefined ? '–' : `${(x / 1000).toFixed(1)} s`);
console.log(`## Lab: fleet mode (simulated nodes kept Ready by one process)

Command: \`npm run build && node bench/lab-fleet.bench.js\` — a lab with no worker namespaces (\`lab up --nodes 0 --no-workload
--grace 40s --monitor-period 5s --lease-renew 10s\`), then \`lab fleet --count N --zones 3 --duration ${HOLD}\` per size: N kubelets
in one Node process, each renewing its Lease every 10 s (+ up to 4 % jitter) and posting NodeStatus every minute, against
the real kube-apiserver, etcd and node lifecycle controller. "Kept Ready": every node Ready and no Ready→not-Ready
transition afterwards. Steady figures are measured from the moment all N were first Ready to the end of the hold.
Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; date ${new Date().toISOString().slice(0, 10)}.
The apiserver, etcd and controller-manager share the same 2 cores with the fleet (and with any other lab running).

| nodes | kept Ready | all Ready after | renewals/s (steady; ideal N/10.2) | longest renew gap | fleet CPU | fleet RSS | load avg at start |
|---:|:---:|---:|---:|---:|---:|---:|---:|
${rows
  .map(
    ({ n, s, kept, load }) =>
      `| ${n} | ${kept ? 'yes' : 'no'} | ${ms(s.allReadyAfterMs)} | ${s.steadyRenewalsPerSecond ?? '–'} (${(n / 10.2).toFixed(0)}) | ${ms(s.maxRenewGapMs)} | ${(s.cpuSeconds / (s.elapsedMs / 1000)).toFixed(2)} core | ${s.rssMiB} MiB | ${load.toFixed(1)} |`,
  )
  .join('\n')}

Largest fleet kept Ready: **${best || 'none'}** simulated nodes (target: 1,000 or more).
`);
