// Guard latency: the time from a change written to the apiserver to the probe's reading that reflects it, against
// a 1 s polling baseline (the default cadence of the best-known chaos tools), side by side in one run on the lab.
//
//   npm run build && node bench/guard-latency.bench.js        (root on Linux: it starts lab instance `prb2`)
//   KUBE_RUNBOOK_BENCH_INVENTORY=path/to/inventory.yaml ...   (use that cluster instead of a lab)
//   KUBE_RUNBOOK_BENCH_SAMPLES=100                            (changes of each kind)
//   KUBE_RUNBOOK_BENCH_PROBES_BESIDE=/path/to/another/checkout (built: its probes, on watches of their own, judge the
//                                                             same changes beside this build's, in this process)
//
// Two kinds of change: a pod bound to a node getting a deletionTimestamp (DELETE with a grace period; probe
// pod-deletions) and a node's Ready condition flipping (status patch; probe node-ready). Each change is timed from
// just before its write request is sent. The probes run on the shared watches; the baseline GETs the same object
// every second. Prints its section of BENCHMARKS.md.
import { cpus, loadavg, release, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ensureLabBinaries, labDown, labUp } from '../packages/lab/dist/index.js';
import { watchSpecs } from '../dist/kube/resources.js';
import nodeReady from '../dist/probes/node-ready.js';
import podDeletions from '../dist/probes/pod-deletions.js';
import { benchCtx } from './parts/bench-ctx.js';
import { quantile } from './parts/quantile.js';

const SAMPLES = Number(process.env.KUBE_RUNBOOK_BENCH_SAMPLES ?? 100);
// another build's probes beside this one's (a checkout with its own `npm run build`)
const BESIDE = process.env.KUBE_RUNBOOK_BENCH_PROBES_BESIDE;
const INSTANCE = 'prb2';
const NS = 'kr-bench';
const NODE = 'kr-bench-node';
const now = () => performance.now();
const sleep = (ms) => delay(ms);
const gap = () => 250 + Math.random() * 250;

/** Another build's probes and watch specs, and a Ctx of its own (its own cluster access, hence its own watches). */
async function besideBuild(root, cluster) {
  const at = (path) => import(pathToFileURL(resolve(root, path)).href);
  const [{ watchSpecs }, { default: nodeReady }, { default: podDeletions }, { benchCtx: ctxOf }] = await Promise.all([
    at('dist/kube/resources.js'),
    at('dist/probes/node-ready.js'),
    at('dist/probes/pod-deletions.js'),
    at('bench/parts/bench-ctx.js'),
  ]);
  return { name: root, watchSpecs, nodeReady, podDeletions, ...(await ctxOf(cluster)) };
}

/** Runs a probe and calls `on` with each reading the moment the guard would get it. */
function consume(ctx, probe, params, on) {
  const it = probe.start(ctx, probe.meta.params.parse(params))[Symbol.asyncIterator]();
  return (async () => {
    for (;;) {
      const n = await it.next();
      if (n.done) return;
      on(n.value, now());
    }
  })();
}

/** Polls `read` every second (like a 1 s probe interval) and calls `on` with each answer and when it came. */
function poll(signal, read, on) {
  return (async () => {
    while (!signal.aborted) {
      const started = now();
      try {
        on(await read(), now());
      } catch {
        // a missed poll is just late
      }
      await sleep(Math.max(0, 1000 - (now() - started)));
    }
  })();
}

async function waitUntil(cond, ms, what) {
  const end = now() + ms;
  while (!cond()) {
    if (now() > end) throw new Error(`timed out: ${what}`);
    await sleep(20);
  }
}

async function main() {
  let inventoryFile = process.env.KUBE_RUNBOOK_BENCH_INVENTORY;
  let kubeconfig;
  let context;
  let ownLab = false;
  if (!inventoryFile) {
    await ensureLabBinaries();
    const lab = await labUp({ instance: INSTANCE, nodes: 2, workload: false });
    ownLab = true;
    ({ inventoryFile, kubeconfig, context } = lab);
  }
  const { ctx, kube, abort } = await benchCtx({ inventoryFile, kubeconfig, context });
  // the changes and the 1 s pollers go through client-node, as a polling tool's would (the executor's own cluster
  // access keeps no client-node KubeConfig)
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  if (context) kc.setCurrentContext(context);
  const core = kc.makeApiClient(CoreV1Api);
  const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  const readyPatch = (status) => {
    const t = new Date().toISOString();
    return {
      status: {
        conditions: [
          {
            type: 'Ready',
            status,
            reason: 'Bench',
            message: 'flipped by the guard-latency benchmark',
            lastHeartbeatTime: t,
            lastTransitionTime: t,
          },
        ],
      },
    };
  };
  const version = JSON.parse((await kube.raw('/version')).body).gitVersion;
  const builds = [{ name: 'this build', watchSpecs, nodeReady, podDeletions, ctx, kube, abort }];
  try {
    await core.deleteNamespace({ name: NS }).catch(() => {});
    for (let i = 0; i < 100; i++) {
      try {
        await core.createNamespace({ body: { metadata: { name: NS } } });
        break;
      } catch {
        await sleep(500); // the previous run's namespace is still terminating
      }
    }
    await core.deleteNode({ name: NODE }).catch(() => {});
    await core.createNode({ body: { metadata: { name: NODE, labels: { 'kube-runbook/bench': 'true' } } } });
    await core.patchNodeStatus({ name: NODE, body: readyPatch('True') }, strategic);
    // the namespace's default ServiceAccount comes a moment after the namespace
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'default' } } }).catch(() => {});
    for (let i = 0; i < SAMPLES; i++)
      await core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: `p-${i}` },
          spec: { nodeName: NODE, automountServiceAccountToken: false, containers: [{ name: 'c', image: 'bench.invalid/none' }] },
        },
      });

    // Each build's probes on watches of their own (this build's first, the other's beside it when named). When each
    // change arrives on a build's shared watch (what its probes then judge) splits the latency into the apiserver's
    // part (write, etcd, watch cache) and the build's (judging, yielding the reading).
    if (BESIDE) builds.push(await besideBuild(BESIDE, { inventoryFile, kubeconfig, context }));
    const pumps = [];
    for (const b of builds) {
      Object.assign(b, { podEventAt: new Map(), nodeEvents: [], deletions: 0, deletionsAt: [], ready: undefined, readyAt: [] });
      b.podsWatch = b.kube.watches.watch(b.watchSpecs.pods());
      b.nodesWatch = b.kube.watches.watch(b.watchSpecs.nodes());
      b.podsWatch.subscribe((c) => {
        if (
          c.type === 'modified' &&
          c.object.namespace === NS &&
          c.object.deletionTimestamp !== undefined &&
          !b.podEventAt.has(c.object.name)
        )
          b.podEventAt.set(c.object.name, now());
      });
      b.nodesWatch.subscribe((c) => {
        if (c.type === 'modified' && c.key === NODE && c.object.ready?.status !== c.previous?.ready?.status)
          b.nodeEvents.push({ ready: c.object.ready?.status === 'True', t: now() });
      });
      // --- the probes on the shared watches, started before any change
      pumps.push(
        consume(b.ctx, b.podDeletions, { namespaces: [NS], max: 1_000_000 }, (r, t) => {
          const n = r.value?.count ?? 0;
          for (; b.deletions < n; b.deletions++) b.deletionsAt[b.deletions] = t;
        }),
        consume(b.ctx, b.nodeReady, { nodes: { names: [NODE] }, flapping: { transitions: 1_000_000, window: '1s' } }, (r, t) => {
          if (r.status === 'unknown') return;
          const s = r.status === 'ok';
          if (s !== b.ready) b.readyAt.push({ ready: s, t });
          b.ready = s;
        }),
      );
    }
    // --- the 1 s pollers
    const polledDeleted = new Map();
    const polledReady = [];
    let lastPolledReady;
    pumps.push(
      poll(
        ctx.signal,
        () => core.listNamespacedPod({ namespace: NS }),
        (list, t) => {
          for (const p of list.items)
            if (p.metadata.deletionTimestamp && !polledDeleted.has(p.metadata.name)) polledDeleted.set(p.metadata.name, t);
        },
      ),
      poll(
        ctx.signal,
        () => core.readNode({ name: NODE }),
        (n, t) => {
          const s = n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
          if (s !== lastPolledReady) polledReady.push({ ready: s, t });
          lastPolledReady = s;
        },
      ),
    );
    // The bench node has no kubelet: heartbeat its status so that the node lifecycle controller leaves it (and its
    // pods) alone; the status itself only changes when a flip below changes it.
    const heartbeat = (async () => {
      while (!ctx.signal.aborted) {
        await sleep(2000);
        const t = new Date().toISOString();
        await core
          .patchNodeStatus({ name: NODE, body: { status: { conditions: [{ type: 'Ready', lastHeartbeatTime: t }] } } }, strategic)
          .catch(() => {});
      }
    })();
    pumps.push(heartbeat);
    await waitUntil(
      () => builds.every((b) => b.ready === true) && lastPolledReady === true,
      60_000,
      'probes and pollers see the bench node Ready',
    );
    await sleep(1500);

    // --- pods getting a deletionTimestamp
    for (const b of builds) Object.assign(b, { podWatch: [], podApi: [], podOurs: [], nodeWatch: [], nodeApi: [], nodeOurs: [] });
    const podPoll = [];
    const load0 = loadavg()[0];
    for (let i = 0; i < SAMPLES; i++) {
      const t0 = now();
      await core.deleteNamespacedPod({ name: `p-${i}`, namespace: NS, gracePeriodSeconds: 30 });
      const name = `p-${i}`;
      for (const b of builds) {
        await waitUntil(() => b.deletions > i, 10_000, `the probe's reading of deletion ${i} (${b.name})`);
        b.podWatch.push(b.deletionsAt[i] - t0);
        b.podApi.push(b.podEventAt.get(name) - t0);
        b.podOurs.push(b.deletionsAt[i] - b.podEventAt.get(name));
      }
      void waitUntil(() => polledDeleted.has(name), 10_000, 'poll').then(
        () => podPoll.push(polledDeleted.get(name) - t0),
        () => {},
      );
      await sleep(gap());
    }

    // --- a node's Ready condition flipping
    const nodePoll = [];
    let want = true;
    for (let i = 0; i < SAMPLES; i++) {
      want = !want;
      const seen = builds.map((b) => ({ watch: b.readyAt.length, events: b.nodeEvents.length }));
      const seenPoll = polledReady.length;
      const t0 = now();
      await core.patchNodeStatus({ name: NODE, body: readyPatch(want ? 'True' : 'False') }, strategic);
      for (const [k, b] of builds.entries()) {
        await waitUntil(
          () => b.readyAt.slice(seen[k].watch).some((x) => x.ready === want),
          10_000,
          `the probe's reading of flip ${i} (${b.name})`,
        );
        const reading = b.readyAt.slice(seen[k].watch).find((x) => x.ready === want).t;
        const event = b.nodeEvents.slice(seen[k].events).find((x) => x.ready === want).t;
        b.nodeWatch.push(reading - t0);
        b.nodeApi.push(event - t0);
        b.nodeOurs.push(reading - event);
      }
      const target = want;
      void waitUntil(() => polledReady.slice(seenPoll).some((x) => x.ready === target), 10_000, 'poll').then(
        () => nodePoll.push(polledReady.slice(seenPoll).find((x) => x.ready === target).t - t0),
        () => {},
      );
      // hold each state long enough for a 1 s poller to see it, at a random phase
      await sleep(1100 + Math.random() * 400);
    }
    await sleep(1500);
    const load1 = loadavg()[0];
    for (const b of builds) {
      b.abort();
      b.podsWatch.release();
      b.nodesWatch.release();
    }
    await Promise.allSettled(pumps);

    const f = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
    const q = (xs) => [quantile(xs, 0.5), quantile(xs, 0.99)];
    const row = (what, w, p) => {
      const [[w50, w99], [p50, p99]] = [q(w), q(p)];
      return `| ${what} | ${w.length} / ${p.length} | ${f(w50)} ms | ${f(w99)} ms | ${f(p50)} ms | ${f(p99)} ms | ${(p50 / w50).toFixed(0)}× | ${(p99 / w99).toFixed(0)}× |`;
    };
    const [ours, other] = builds;
    // the other build's figures as multiples of this build's
    const times = (a, b) => `${(a / b).toFixed(2)}×`;
    const split = (b, api, judged) =>
      `${f(quantile(b[api], 0.5))} / ${f(quantile(b[api], 0.99))} ms | ${f(quantile(b[judged], 0.5))} / ${f(quantile(b[judged], 0.99))} ms`;
    const cpu = cpus();
    console.log(
      [
        '## Guard latency: watch-driven probes vs 1 s polling',
        '',
        `Command: \`npm run build && ${BESIDE ? `KUBE_RUNBOOK_BENCH_PROBES_BESIDE=${BESIDE} ` : ''}node bench/guard-latency.bench.js\` (bench/guard-latency.bench.js). Machine: ${cpu[0]?.model.trim()} × ${cpu.length}, ` +
          `${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}, Node ${process.version}. Date: ${new Date().toISOString().slice(0, 10)}. ` +
          `Cluster: ${ownLab ? `lab instance ${INSTANCE} (2 simulated nodes, no workload)` : inventoryFile}, Kubernetes ${version}.`,
        '',
        'Time from just before the write request is sent to the moment the probe yields the reading that reflects it',
        "(`pod-deletions` for a pod getting a deletionTimestamp, `node-ready` for a node's Ready flipping), and to the",
        'moment a poller that GETs the same object every second sees it. Both run at once, on the same changes.',
        ...(other
          ? [
              `The probes of the build in ${other.name} ran beside this build's, in the same process on watches of their own, on the same changes.`,
            ]
          : []),
        '',
        '| change | build | samples (watch / poll) | watch p50 | watch p99 | 1 s poll p50 | 1 s poll p99 | ratio p50 | ratio p99 |',
        '|---|---|---|---|---|---|---|---|---|',
        ...builds.flatMap((b) => [
          row('pod gets a deletionTimestamp', b.podWatch, podPoll).replace(/^\| ([^|]+) \|/, `| $1 | ${b.name} |`),
          row("node's Ready flips", b.nodeWatch, nodePoll).replace(/^\| ([^|]+) \|/, `| $1 | ${b.name} |`),
        ]),
        ...(other
          ? [
              `| pod gets a deletionTimestamp | **this build ÷ ${other.name}** | | ${times(quantile(ours.podWatch, 0.5), quantile(other.podWatch, 0.5))} | ${times(quantile(ours.podWatch, 0.99), quantile(other.podWatch, 0.99))} | | | | |`,
              `| node's Ready flips | **this build ÷ ${other.name}** | | ${times(quantile(ours.nodeWatch, 0.5), quantile(other.nodeWatch, 0.5))} | ${times(quantile(ours.nodeWatch, 0.99), quantile(other.nodeWatch, 0.99))} | | | | |`,
            ]
          : []),
        '',
        'Where the watch path spends it (p50 / p99): from the write to the event on the shared watch (apiserver, etcd,',
        'watch cache), and from the event to the reading (the probe judging and yielding):',
        '',
        '| change | build | write → watch event | watch event → reading |',
        '|---|---|---|---|',
        ...builds.flatMap((b) => [
          `| pod gets a deletionTimestamp | ${b.name} | ${split(b, 'podApi', 'podOurs')} |`,
          `| node's Ready flips | ${b.name} | ${split(b, 'nodeApi', 'nodeOurs')} |`,
        ]),
        '',
        `Load average (1 min) at the start and end of the measurements: ${load0.toFixed(2)} and ${load1.toFixed(2)} on ${cpu.length} cores.`,
        '',
        `Target: watch p99 under 100 ms — ${Math.max(quantile(ours.podWatch, 0.99), quantile(ours.nodeWatch, 0.99)) < 100 ? 'met' : 'NOT met'}.`,
      ].join('\n'),
    );
  } finally {
    abort();
    for (const b of builds.slice(1)) {
      b.abort();
      b.kube.close();
    }
    await core.deleteNamespace({ name: NS }).catch(() => {});
    await core.deleteNode({ name: NODE }).catch(() => {});
    kube.close();
    if (ownLab) await labDown(INSTANCE);
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`guard-latency: ${e?.message ?? e}`);
    process.exit(1);
  },
);
