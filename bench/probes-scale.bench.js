// Probes at scale: the executor's cluster probes over a large cluster against client-go informers, side by side in
// one run. A lab with no worker namespaces, a fleet of simulated nodes (`lab fleet`: kubelets that renew their
// Leases and post NodeStatus against the real apiserver and controller-manager), and pods bound to them, created
// through the apiserver and set Running once by the fleet. Then, per size, two processes start at the same moment:
//
//   - the executor's side (bench/parts/probes-executor.js): node-leases, node-ready, noexecute-taints,
//     pod-deletions, eviction-forecast and endpoints-stability as a large game day guards with them;
//   - client-go shared informers on Nodes, node Leases and Pods (bench/baselines/informer, Go, built here).
//
// Each reports its memory after the initial lists and at the end of the hold, its CPU, when it could first read
// (each probe's first reading; each informer's sync), and, under churn, the delay of each lease renewal (from the
// renewTime the fleet wrote to the moment it reached the probes' watch / the informer's handler) and of each pod
// deletion (from the DELETE request to pod-deletions' reading / the informer's delete handler).
//
//   npm run build && node bench/probes-scale.bench.js         (root on Linux; `lab install` done once; Go 1.26+, which client-go v0.37.2 needs)
//   KUBE_RUNBOOK_BENCH_NODES=5000  KUBE_RUNBOOK_BENCH_PODS="1000 30000 150000"
//   KUBE_RUNBOOK_BENCH_HOLD=10m  KUBE_RUNBOOK_BENCH_SHORT_HOLD=2m  (the largest size holds HOLD, the others SHORT_HOLD)
//   KUBE_RUNBOOK_BENCH_CHURN=10                                  (pod deletions per second, each replaced)
//   KUBE_RUNBOOK_BENCH_RUNNING_WAIT=10m                          (longest wait for the fleet to set the pods Running)
//   KUBE_RUNBOOK_BENCH_EXECUTOR_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/p"  (Node flags for the executor: where its time goes)
//   KUBE_RUNBOOK_BENCH_EXECUTOR_BESIDE=/path/to/another/checkout  (built: its executor starts at the same moment, a
//                                                                 third process, and is reported beside this build's)
//
// Besides its section, it keeps ~/.cache/kube-runbook/bench/probes-scale/last-run.json (every figure, each deletion's
// delays, the executor's largest lease delay per 10 s) and executor-<pods>.log (its cluster access's log).
//
// Prints its section of BENCHMARKS.md.
/* global URL */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, homedir, loadavg, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { realClock } from '../dist/core/clock.js';
import { parseDuration } from '../dist/core/duration.js';
import { KubeHttp } from '../dist/kube/http.js';
import { loadClientConfig } from '../dist/kube/kubeconfig.js';
import { readLabInfo } from '../packages/lab/dist/host/info.js';
import { measured } from './parts/measured.js';
import { quantile } from './parts/quantile.js';
import { scaleSettings } from './parts/scale-settings.js';

const env = process.env;
const { nodes: NODES, sizes: SIZES, churn: CHURN } = scaleSettings(env);
const HOLD = env.KUBE_RUNBOOK_BENCH_HOLD ?? '10m';
const SHORT_HOLD = env.KUBE_RUNBOOK_BENCH_SHORT_HOLD ?? '2m';
const RUNNING_WAIT = env.KUBE_RUNBOOK_BENCH_RUNNING_WAIT ?? '10m';
// Node flags for the executor's process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p" to see where its time goes
const EXECUTOR_FLAGS = (env.KUBE_RUNBOOK_BENCH_EXECUTOR_FLAGS ?? '').split(/\s+/).filter(Boolean);
const INSTANCE = 'psc';
const NS = 'kr-scale';
/** The lab's CLI (packages/lab): every command this benchmark runs is the lab's. */
const CLI = fileURLToPath(new URL('../packages/lab/bin/kube-runbook-lab.js', import.meta.url));
const EXECUTOR = fileURLToPath(new URL('parts/probes-executor.js', import.meta.url));
// another build's executor beside this one's (a checkout with its own `npm run build`)
const BESIDE = env.KUBE_RUNBOOK_BENCH_EXECUTOR_BESIDE;
const INFORMER_SRC = fileURLToPath(new URL('baselines/informer', import.meta.url));
const WORK = join(env.KUBE_RUNBOOK_CACHE_DIR ?? join(homedir(), '.cache', 'kube-runbook'), 'bench', 'probes-scale');
const epochMs = () => performance.timeOrigin + performance.now();
const log = (m) => console.error(`[probes-scale ${new Date().toISOString().slice(11, 19)}] ${m}`);

function kr(...args) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 1_800_000, maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) throw new Error(`kube-runbook-lab ${args.join(' ')} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return r;
}

/** Builds the client-go informer program with the machine's Go, into the cache (module downloads cached there too). */
function buildInformer() {
  mkdirSync(WORK, { recursive: true });
  const bin = join(WORK, 'informer');
  const goEnv = {
    ...env,
    GOTOOLCHAIN: 'local',
    GOFLAGS: '-mod=mod',
    GOMODCACHE: join(WORK, 'go', 'mod'),
    GOCACHE: join(WORK, 'go', 'build'),
    CGO_ENABLED: '0',
  };
  delete goEnv.GOROOT;
  delete goEnv.GOPATH;
  const r = spawnSync('go', ['build', '-trimpath', '-o', bin, '.'], {
    cwd: INFORMER_SRC,
    env: goEnv,
    encoding: 'utf8',
    timeout: 1_200_000,
  });
  if (r.status !== 0) throw new Error(`building the informer baseline failed (${r.status}): ${(r.stderr ?? '').slice(-2000)}`);
  const v = spawnSync('go', ['version'], { env: goEnv, encoding: 'utf8' }).stdout.trim();
  return { bin, go: v };
}

/** A process's resident set now (MiB), from /proc. */
function rssMiBOf(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : null;
}

async function main() {
  const { bin: informerBin, go } = buildInformer();
  log(`informer built with ${go}`);
  kr('down', '--instance', INSTANCE);
  kr(
    'up',
    '--instance',
    INSTANCE,
    '--nodes',
    '0',
    '--no-workload',
    '--grace',
    '40s',
    '--monitor-period',
    '5s',
    '--lease-renew',
    '10s',
    '--etcd-quota',
    '8Gi',
  );
  const info = await readLabInfo(INSTANCE);
  const http = new KubeHttp(loadClientConfig({ file: info.kubeconfig, context: info.context }), realClock);
  const api = async (path, o = {}) => {
    const a = await http.request(path, { timeoutMs: 60_000, ...o });
    if (a.status >= 300 && !(o.okStatus ?? []).includes(a.status))
      throw new Error(`${o.method ?? 'GET'} ${path}: ${a.status} ${a.body.slice(0, 300)}`);
    return a.body ? JSON.parse(a.body) : {};
  };

  const fleetLog = createWriteStream(join(WORK, 'fleet.log'));
  const fleet = spawn(process.execPath, [CLI, 'fleet', '--instance', INSTANCE, '--count', String(NODES), '--zones', '3', '--json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  fleet.stdout.pipe(fleetLog);
  fleet.stderr.pipe(fleetLog);
  let fleetOut = '';
  fleet.stdout.on('data', (d) => (fleetOut += d));
  const rows = [];
  let failure;
  try {
    // every fleet node Ready
    const fleetNodes = [];
    const readyCount = async () => {
      let n = 0;
      let cont = '';
      fleetNodes.length = 0;
      do {
        const page = await api(
          `/api/v1/nodes?labelSelector=lab.kube-runbook.dev%2Ffleet%3D${INSTANCE}&limit=1000${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`,
        );
        for (const node of page.items) {
          fleetNodes.push(node.metadata.name);
          if (node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True') n++;
        }
        cont = page.metadata?.continue ?? '';
      } while (cont);
      return n;
    };
    const fleetStart = epochMs();
    for (let ready = 0; ready < NODES; ready = await readyCount()) {
      if (epochMs() - fleetStart > 900_000) throw new Error(`the fleet did not get ${NODES} nodes Ready in 15 minutes (${ready} Ready)`);
      await sleep(5000);
    }
    fleetNodes.sort();
    log(`${NODES} fleet nodes Ready after ${((epochMs() - fleetStart) / 1000).toFixed(0)} s`);

    await api(`/api/v1/namespaces/${NS}`, { method: 'DELETE', okStatus: [404] });
    for (let i = 0; ; i++) {
      const a = await http.request('/api/v1/namespaces', { method: 'POST', body: { metadata: { name: NS } }, timeoutMs: 30_000 });
      if (a.status < 300) break;
      if (i > 120) throw new Error(`cannot create namespace ${NS}: ${a.status}`);
      await sleep(1000);
    }
    for (let i = 0; ; i++) {
      // pods need the namespace's default ServiceAccount, which its controller makes a moment after the namespace
      const a = await http.request(`/api/v1/namespaces/${NS}/serviceaccounts`, {
        method: 'POST',
        body: { metadata: { name: 'default' } },
        timeoutMs: 30_000,
      });
      if (a.status < 300 || a.status === 409) break;
      if (i > 60) throw new Error(`cannot create the default ServiceAccount in ${NS}: ${a.status}`);
      await sleep(1000);
    }
    const podBody = (i) => ({
      metadata: { name: `p-${i}`, labels: { app: `app-${i % 50}`, 'kube-runbook/bench': 'probes-scale' } },
      spec: {
        nodeName: fleetNodes[i % fleetNodes.length],
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        containers: [{ name: 'c', image: 'bench.invalid/none' }],
        // no taint eviction: the only deletions are the ones measured, whatever the fleet's nodes do meanwhile
        tolerations: [
          { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
          { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
        ],
      },
    });
    const createPods = async (from, to, concurrency = 24) => {
      let next = from;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < to) {
            const i = next++;
            for (let attempt = 0; ; attempt++) {
              const a = await http
                .request(`/api/v1/namespaces/${NS}/pods`, { method: 'POST', body: podBody(i), timeoutMs: 60_000 })
                .catch((e) => ({ status: 0, body: String(e) }));
              if (a.status < 300 || a.status === 409) break;
              if (attempt > 20) throw new Error(`creating pod p-${i}: ${a.status} ${a.body.slice(0, 200)}`);
              await sleep(500 * (attempt + 1));
            }
          }
        }),
      );
    };
    const notRunning = async () => {
      const page = await api(`/api/v1/namespaces/${NS}/pods?fieldSelector=status.phase%21%3DRunning&limit=1`);
      return page.items.length + (page.metadata?.remainingItemCount ?? 0);
    };

    // the pods to delete next, oldest first; each one deleted is replaced by a new one at the end
    const live = [];
    let nextPod = 0;
    for (const pods of SIZES) {
      const t0 = epochMs();
      const from = nextPod;
      const to = from + (pods - live.length);
      await createPods(from, to);
      for (let i = from; i < to; i++) live.push(`p-${i}`);
      nextPod = to;
      const created = epochMs() - t0;
      // the fleet sets each pod Running once; the measurement starts when it has, or after RUNNING_WAIT in any case
      let left = await notRunning();
      while (left > 0 && epochMs() - t0 < parseDuration(RUNNING_WAIT)) {
        await sleep(5000);
        left = await notRunning();
      }
      log(
        `${pods} pods created in ${(created / 1000).toFixed(0)} s; ${pods - left} Running after ${((epochMs() - t0) / 1000).toFixed(0)} s`,
      );

      const load = loadavg()[0];
      // the executor's cluster access logs to WORK/executor-<pods>.log (watches failing, restarting, relisting)
      const exLog = join(WORK, `executor-${pods}.log`);
      writeFileSync(exLog, '');
      process.env.KUBE_RUNBOOK_BENCH_LOG = exLog;
      const ex = measured('executor', process.execPath, [...EXECUTOR_FLAGS, EXECUTOR, info.inventoryFile, info.kubeconfig, info.context]);
      const inf = measured('informer', informerBin, ['-kubeconfig', info.kubeconfig, '-context', info.context]);
      const other = BESIDE
        ? measured('executor beside', process.execPath, [
            resolve(BESIDE, 'bench/parts/probes-executor.js'),
            info.inventoryFile,
            info.kubeconfig,
            info.context,
          ])
        : undefined;
      // the first readings: every probe read, every informer synced
      const syncStart = epochMs();
      let exStart;
      let infStart;
      let otherStart;
      for (;;) {
        if (epochMs() - syncStart > 900_000) throw new Error('the probes or informers did not read within 15 minutes');
        await sleep(1000);
        const [e, i] = await Promise.all([ex.stats(), inf.stats()]);
        if (!exStart && Object.keys(e.firstReadingMs).length === 6) exStart = e;
        if (!infStart && Object.keys(i.syncedAfterMs).length === 3) infStart = i;
        if (other && !otherStart && Object.keys((await other.stats()).firstReadingMs).length === 6) otherStart = await other.stats();
        if (exStart && infStart && (!other || otherStart)) break;
      }
      // settle: the first stats after both have read is "after the initial lists"
      await sleep(5000);
      const [exSynced, infSynced, otherSynced] = await Promise.all([ex.stats(), inf.stats(), other?.stats()]);
      log(`${pods} pods: executor ${exSynced.rssMiB.toFixed(0)} MiB, informer ${infSynced.rssMiB.toFixed(0)} MiB after the initial lists`);

      // churn: CHURN deletions per second (grace 0: the pod is gone at once), each pod replaced
      const holdMs = parseDuration(pods === SIZES[SIZES.length - 1] ? HOLD : SHORT_HOLD);
      const sent = new Map();
      const holdStart = epochMs();
      // memory through the hold, every 30 s: the executor's heap as V8 sees it, both processes' RSS
      const samples = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const exMem = await ex.mem().catch(() => undefined);
          samples.push({ atS: (epochMs() - holdStart) / 1000, ex: exMem, infRssMiB: rssMiBOf(inf.pid) });
          for (let waited = 0; sampling && waited < 30_000; waited += 1000) await sleep(1000);
        }
      })();
      const churn = (async () => {
        for (let k = 0; epochMs() - holdStart < holdMs; k++) {
          const wait = holdStart + (k * 1000) / CHURN - epochMs();
          if (wait > 0) await sleep(wait);
          const name = live.shift();
          sent.set(`${NS}/${name}`, epochMs());
          await api(`/api/v1/namespaces/${NS}/pods/${name}?gracePeriodSeconds=0`, { method: 'DELETE', okStatus: [404] }).catch((e) =>
            log(`delete ${name}: ${e.message}`),
          );
          await createPods(nextPod, nextPod + 1, 1);
          live.push(`p-${nextPod++}`);
        }
      })();
      await churn;
      await sleep(5000);
      sampling = false;
      await sampler;
      const [exEnd, infEnd, otherEnd] = await Promise.all([ex.stats(), inf.stats(), other?.stats()]);
      // what the executor holds: its heap after a full collection, asked for last (it changes what it measures)
      const exLive = await ex.live();
      await Promise.all([ex.quit(), inf.quit(), other?.quit()]);
      const delays = (m) => [...sent].filter(([n]) => m.deleted.has(n)).map(([n, t]) => m.deleted.get(n) - t);
      const exDel = delays(ex);
      const infDel = delays(inf);
      const beside = other ? { start: otherStart, synced: otherSynced, end: otherEnd, del: delays(other) } : undefined;
      rows.push({
        pods,
        running: pods - left,
        load,
        created,
        exSynced,
        infSynced,
        exEnd,
        infEnd,
        exDel,
        infDel,
        sent: sent.size,
        holdMs,
        exStart,
        infStart,
        samples,
        exLive,
        beside,
      });
      // for diagnosis: each deletion's second into the hold and its delay to the executor and to the informer
      const timeline = [...sent].map(([n, t]) => [
        Math.round((t - holdStart) / 1000),
        ex.deleted.has(n) ? ex.deleted.get(n) - t : null,
        inf.deleted.has(n) ? inf.deleted.get(n) - t : null,
      ]);
      rows[rows.length - 1].deletionTimeline = timeline;
      writeFileSync(
        join(WORK, 'last-run.json'),
        JSON.stringify(rows.map(({ exDel, infDel, ...r }) => ({ ...r, exDelN: exDel.length, infDelN: infDel.length }))),
      );
      log(`${pods} pods: done (${sent.size} deletions; executor saw ${exDel.length}, informer ${infDel.length})`);
    }
  } catch (e) {
    // a size that fails (the lab's etcd out of space, the fleet not Ready) ends the run; the sizes done are reported
    log(`stopped: ${e.message}`);
    failure = e;
  } finally {
    fleet.kill('SIGTERM');
    await Promise.race([new Promise((r) => fleet.on('exit', r)), sleep(120_000)]);
    kr('down', '--instance', INSTANCE);
  }
  let fleetFinal;
  try {
    fleetFinal = JSON.parse(fleetOut.trim().split('\n').pop());
  } catch {
    fleetFinal = undefined;
  }
  report(rows, go, fleetFinal);
  if (failure) process.exitCode = 1;
}

const f1 = (x) => (x === null || x === undefined ? '–' : x.toFixed(1));
const f2 = (x) => (x === null || x === undefined ? '–' : x.toFixed(2));
const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : '–');
/** A Markdown table of a row per pod count and a column per probe, each cell `cell(row, id)`. */
const perProbeTable = (rows, ids, cell) =>
  [
    `| pods | ${ids.join(' | ')} |`,
    `|---:|${ids.map(() => '---:').join('|')}|`,
    ...rows.map((r) => `| ${r.pods} | ${ids.map((id) => cell(r, id)).join(' | ')} |`),
  ].join('\n');

/** The other build's executor (KUBE_RUNBOOK_BENCH_EXECUTOR_BESIDE), and this build's as a multiple of it. */
function besideRows(r, cpuEx) {
  const b = r.beside;
  const cpu = b.end.cpuSeconds - b.synced.cpuSeconds;
  const last = Math.max(...Object.values(b.start.firstReadingMs));
  const judged = (s) => s.judgeMs['eviction-forecast'].cpu.p50;
  return [
    `| ${r.pods} | executor of ${BESIDE} | ${f1(b.synced.rssMiB)} MiB | ${f1(b.synced.heapMiB)} MiB | ${f1(b.end.rssMiB)} MiB | ${f1(cpu)} s (${f1((cpu / (r.holdMs / 1000)) * 100)} %) | ${f1(last / 1000)} s | ${f1(b.end.leaseDelayMs.p50)} / ${f1(b.end.leaseDelayMs.p99)} ms | ${f1(quantile(b.del, 0.5))} / ${f1(quantile(b.del, 0.99))} ms |`,
    `| ${r.pods} | executor ÷ ${BESIDE} (forecast judgement CPU p50 ${ratio(judged(r.exEnd), judged(b.end))}) | ${ratio(r.exSynced.rssMiB, b.synced.rssMiB)} | | ${ratio(r.exEnd.rssMiB, b.end.rssMiB)} | ${ratio(cpuEx, cpu)} | | ${ratio(r.exEnd.leaseDelayMs.p99, b.end.leaseDelayMs.p99)} (p99) | ${ratio(quantile(r.exDel, 0.99), quantile(b.del, 0.99))} (p99) |`,
  ];
}

function report(rows, go, fleet) {
  const ids = ['node-leases', 'node-ready', 'noexecute-taints', 'pod-deletions', 'eviction-forecast', 'endpoints-stability'];
  console.log(`## Probes at scale: ${NODES} nodes, ${SIZES.join(' / ')} pods, against client-go informers

Command: \`npm run build && node bench/probes-scale.bench.js\` (bench/probes-scale.bench.js). A lab with no worker namespaces
(\`lab up --nodes 0 --no-workload --grace 40s --monitor-period 5s --lease-renew 10s --etcd-quota 8Gi\`), \`lab fleet --count ${NODES} --zones 3\`
(simulated kubelets renewing their Leases every 10 s and posting NodeStatus every minute), and pods bound to the fleet's
nodes, created through the apiserver and set Running once by the fleet. Per size, at the same moment: the executor's
cluster probes (node-leases, node-ready, noexecute-taints, pod-deletions, eviction-forecast, endpoints-stability, on the
shared watches, in a process of their own: bench/parts/probes-executor.js) and client-go shared informers on Nodes,
node Leases and Pods with default settings (bench/baselines/informer, client-go v0.37.2, ${go}). Churn during the hold:
the fleet's lease renewals (~${Math.round(NODES / 10)}/s) and ${CHURN} pod deletions/s (grace 0, each replaced by a new pod).
Lease delay: from the renewTime the fleet wrote to the event reaching the probes' watch / the informer's handler.
Deletion delay: from the DELETE request to pod-deletions' reading that counts it / the informer's delete handler.
Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; the apiserver, etcd,
controller-manager, the fleet and both measured processes share these cores. Date: ${new Date().toISOString().slice(0, 10)}.

| pods | process | RSS after lists | heap after lists | RSS at end of hold | CPU over the hold | first reading / sync | lease delay p50 / p99 | deletion delay p50 / p99 |
|---:|---|---:|---:|---:|---:|---:|---:|---:|
${rows
  .map((r) => {
    const cpuEx = r.exEnd.cpuSeconds - r.exSynced.cpuSeconds;
    const cpuInf = r.infEnd.cpuSeconds - r.infSynced.cpuSeconds;
    const lastEx = Math.max(...Object.values(r.exStart.firstReadingMs));
    const lastInf = Math.max(...Object.values(r.infStart.syncedAfterMs));
    return [
      `| ${r.pods} | executor | ${f1(r.exSynced.rssMiB)} MiB | ${f1(r.exSynced.heapMiB)} MiB | ${f1(r.exEnd.rssMiB)} MiB | ${f1(cpuEx)} s (${f1((cpuEx / (r.holdMs / 1000)) * 100)} %) | ${f1(lastEx / 1000)} s | ${f1(r.exEnd.leaseDelayMs.p50)} / ${f1(r.exEnd.leaseDelayMs.p99)} ms | ${f1(quantile(r.exDel, 0.5))} / ${f1(quantile(r.exDel, 0.99))} ms |`,
      `| ${r.pods} | informer | ${f1(r.infSynced.rssMiB)} MiB | ${f1(r.infSynced.heapMiB)} MiB | ${f1(r.infEnd.rssMiB)} MiB | ${f1(cpuInf)} s (${f1((cpuInf / (r.holdMs / 1000)) * 100)} %) | ${f1(lastInf / 1000)} s | ${f1(r.infEnd.leaseDelayMs.p50)} / ${f1(r.infEnd.leaseDelayMs.p99)} ms | ${f1(quantile(r.infDel, 0.5))} / ${f1(quantile(r.infDel, 0.99))} ms |`,
      `| ${r.pods} | executor ÷ informer | ${ratio(r.exSynced.rssMiB, r.infSynced.rssMiB)} | | ${ratio(r.exEnd.rssMiB, r.infEnd.rssMiB)} | ${ratio(cpuEx, cpuInf)} | | ${ratio(r.exEnd.leaseDelayMs.p99, r.infEnd.leaseDelayMs.p99)} (p99) | ${ratio(quantile(r.exDel, 0.99), quantile(r.infDel, 0.99))} (p99) |`,
      ...(r.beside ? besideRows(r, cpuEx) : []),
    ].join('\n');
  })
  .join('\n')}

Time to each probe's first reading (s from the executor's start), and each informer's sync:

| pods | ${ids.join(' | ')} | informers: nodes / leases / pods |
|---:|${ids.map(() => '---:').join('|')}|---:|
${rows.map((r) => `| ${r.pods} | ${ids.map((id) => f1(r.exStart.firstReadingMs[id] / 1000)).join(' | ')} | ${['nodes', 'leases', 'pods'].map((k) => f1(r.infStart.syncedAfterMs[k] / 1000)).join(' / ')} |`).join('\n')}

Judgement time per woken reading over the hold (ms, wall-clock, and in brackets the executor process's CPU time; a
judgement runs when an event can change the probe's verdict, and takes in every such event since the last one):

${perProbeTable(rows, ids, (r, id) => {
  const j = r.exEnd.judgeMs[id];
  return `${j.n}× p50 ${f1(j.p50)} (${f1(j.cpu.p50)}) p99 ${f1(j.p99)} (${f1(j.cpu.p99)})`;
})}

CPU time per event over the hold (ms): each judgement's CPU time shared among the watch events it took in, one
figure per event (p50 / p99, and how many events):

${perProbeTable(rows, ids, (r, id) => {
  const c = r.exEnd.judgeMs[id].cpuPerChange;
  return c ? `${f2(c.p50)} / ${f2(c.p99)} (${c.n})` : '–';
})}

The executor's memory through each hold (MiB; RSS, V8 heap used / committed, external to the heap), beside the
informers' RSS, every 2 minutes:

| pods | at | executor RSS | heap used / committed | external | informer RSS |
|---:|---:|---:|---:|---:|---:|
${rows.flatMap((r) => [...r.samples.filter((x, i, all) => i % 4 === 0 || i === all.length - 1).map((x) => `| ${r.pods} | ${f1(x.atS / 60)} min | ${f1(x.ex?.rssMiB)} | ${f1(x.ex?.heapMiB)} / ${f1(x.ex?.heapTotalMiB)} | ${f1(x.ex?.externalMiB)} | ${f1(x.infRssMiB)} |`), `| ${r.pods} | end, after a full GC | ${f1(r.exLive.rssMiB)} | ${f1(r.exLive.heapMiB)} / ${f1(r.exLive.heapTotalMiB)} | ${f1(r.exLive.externalMiB)} | |`]).join('\n')}

Nodes the eviction forecast judged failing per reading over each hold, and the executor's shared watches (lists /
watch-lists / watches opened / 410 Gone / failures / silent streams restarted, since its start):

| pods | failing nodes p50 / p99 / max (readings) | nodes | leases | pods |
|---:|---:|---:|---:|---:|
${rows
  .map((r) => {
    const f = r.exEnd.forecastFailing;
    const w = (k) => {
      const x = r.exEnd.watchStats?.[k];
      return x ? `${x.lists} / ${x.streamedLists} / ${x.watches} / ${x.gone} / ${x.failures} / ${x.inactivityRestarts}` : '–';
    };
    return `| ${r.pods} | ${f.p50 ?? '–'} / ${f.p99 ?? '–'} / ${f.max ?? '–'} (${f.n}) | ${w('nodes')} | ${w('leases')} | ${w('pods')} |`;
  })
  .join('\n')}

Pods Running when measured (set once by the fleet; at most ${RUNNING_WAIT} waited): ${rows.map((r) => `${r.running}/${r.pods}`).join(', ')}.
Pod deletions sent / seen: ${rows.map((r) => `${r.pods} pods: ${r.sent} sent, executor ${r.exDel.length}, informer ${r.infDel.length}`).join('; ')}.
Load average at each start: ${rows.map((r) => `${r.pods} pods ${r.load.toFixed(1)}`).join(', ')}.
The fleet at the end: ${fleet ? `${fleet.ready}/${fleet.count} Ready, ${fleet.flaps} Ready→not-Ready flap(s) after all were first Ready, longest gap between two renewals of a node ${f1((fleet.maxRenewGapMs ?? 0) / 1000)} s, ${fleet.rssMiB} MiB` : 'no figures (it did not print them)'}.
`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
