import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT } from 'kube-runbook/internal/core/errors.js';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { createLogger } from 'kube-runbook/internal/core/logger.js';
import {
  chooseNodes,
  DEFAULT_MINOR,
  ensureLabBinaries,
  labDown,
  labUp,
  readRealRuntime,
  readRuntime,
  runtimeChange,
  SUPPORTED_MINORS,
  type LabInfo,
  type RealRuntimeState,
} from '../index.js';
import { productCli, productRoot } from '../host/product.js';
import { controllerEvictions } from '../lifecycle/controller-log.js';
import { formatDuration } from 'kube-runbook/internal/core/duration.js';
import type { Observation, RunReport } from 'kube-runbook/internal/report/collect.js';
import { out } from 'kube-runbook/internal/cli/output.js';
import type { Register } from 'kube-runbook/internal/cli/types.js';

const BIN = productCli();
const RUNBOOK = join(productRoot(), 'runbooks', 'apiserver-outage.yaml');

export interface Outcome {
  label: string;
  exitCode: number;
  report: RunReport;
  /**
   * Pods evicted during the run, as the kube-controller-manager's own log says (its taint eviction's "Deleting pod"
   * lines, at their times); the node is where the pod ran when the run started.
   */
  evicted: { pod: string; node: string; at: string }[];
  /** The same as the run's own `pods deleted` observer saw them (cause taint-eviction): checked against `evicted`. */
  evictedSeenByRun: { pod: string; node: string; at: string }[];
  /** Containers killed during the run: on real nodes as their containerd saw it, on simulated ones from the simulator's kill log. */
  killed: { pod: string; node: string; at: string; reason: string; container?: string; id?: string }[];
  /** Where `killed` was counted, for the reader: containerd of the real nodes, the simulator's records, or both. */
  killedFrom: string;
  /** Of the real nodes' containers killed, those whose pod runs the container again (a restart in place). */
  restarted: number;
  /** The application containers running on the real nodes when the run started, as their containerd listed them. */
  realContainersAtStart: number;
  /** The forecast's last prediction of the first eviction made before it happened (or before the run ended). */
  predicted?: { at: string; madeAt: string; pod: string };
  readyAtEnd: string;
  /** Where report.json, junit.xml and timeline.html are. */
  reportDir: string;
}

function runCliChild(args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
    const forward = (sig: NodeJS.Signals) => child.kill(sig);
    process.on('SIGINT', forward);
    child.on('close', (code) => {
      process.off('SIGINT', forward);
      resolve(code ?? 1);
    });
  });
}

/** Runs the runbook in the lab and reads what happened: the report, the pods evicted, the containers killed. */
export async function runAndMeasure(lab: LabInfo, runbook: string, guards: boolean, extra: string[] = []): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), 'kube-runbook-demo-'));
  const workers = lab.nodes.filter((n) => n.roles.includes('worker'));
  const real = workers.filter((n) => n.real);
  const simulated = workers.filter((n) => !n.real);
  // a real node's containers as its containerd holds them: ids and start times before, and after, the run
  const before = await Promise.all(real.map(readRealRuntime));
  const placed = await podNodes(lab);
  const started = realClock.now();
  const exitCode = await runCliChild([
    'run',
    runbook,
    '-i',
    lab.inventoryFile,
    '--yes',
    '--report-dir',
    dir,
    ...(guards ? [] : ['--no-guards']),
    ...extra,
  ]);
  // a kubelet that reconnects kills its containers within a few seconds: give it that long
  await realClock.sleep(8000);
  const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as RunReport;
  const deletions = report.observations['pods deleted'] as Observation | undefined;
  const list = (
    (deletions?.value as { deletions?: { pod: string; node: string; at: number; cause: string }[] } | undefined)?.deletions ?? []
  ).filter((d) => d.cause === 'taint-eviction');
  const evictedSeenByRun = list.map((d) => ({ pod: d.pod, node: d.node, at: new Date(d.at).toISOString() }));
  const evicted = (await controllerEvictions(lab, started)).map((e) => ({
    pod: e.pod,
    node: placed.get(e.pod) ?? '(not running at the start)',
    at: e.at,
  }));
  const runtimes = await Promise.all(simulated.map((n) => readRuntime(lab.stateDir, n.name)));
  const killed: Outcome['killed'] = runtimes.flatMap((rt) =>
    rt.kills
      .filter((k) => k.atMs >= started)
      .map((k) => ({
        pod: `${k.namespace}/${k.pod}`,
        node: k.node,
        at: k.at,
        reason: k.reason,
        container: k.container,
        id: k.containerId,
      })),
  );
  let restarted = 0;
  if (real.length) {
    const after = await afterKills(real, evicted);
    const change = runtimeChange(before, after.states);
    restarted = change.killed.filter((c) => c.restarted).length;
    for (const c of change.killed)
      killed.push({
        pod: `${c.namespace}/${c.pod}`,
        node: c.node,
        at: after.at,
        reason: c.restarted ? 'restarted: its pod runs the container again under a new id' : 'no longer running in containerd',
        container: c.container,
        id: c.id,
      });
  }
  const killedFrom = [
    ...(real.length ? [`containerd of ${real.map((n) => n.name).join(', ')} (container ids and start times before and after)`] : []),
    ...(simulated.length ? [`the kubelet simulator's kill log of ${simulated.map((n) => n.name).join(', ')}`] : []),
  ].join('; ');
  const firstEviction = evicted.map((e) => e.at).sort()[0];
  const forecast = report.observations['eviction forecast'] as Observation | undefined;
  const predictions = (forecast?.history ?? [])
    .map((h) => ({ madeAt: h.at, e: (h.value as { earliestEviction?: { at: string; pod: string } | null } | null)?.earliestEviction }))
    .filter((p): p is { madeAt: string; e: { at: string; pod: string } } => Boolean(p.e) && (!firstEviction || p.madeAt <= firstEviction));
  const last = predictions.at(-1);
  const ready = await readyNodes(lab);
  return {
    label: guards ? 'with guards' : 'without guards',
    exitCode,
    report,
    evicted,
    evictedSeenByRun,
    killed,
    killedFrom,
    restarted,
    realContainersAtStart: before.flatMap((b) => b.containers).filter((c) => c.running).length,
    predicted: last ? { at: last.e.at, madeAt: last.madeAt, pod: last.e.pod } : undefined,
    readyAtEnd: ready,
    reportDir: dir,
  };
}

/**
 * The real nodes' containers once the kubelets have killed what they will: a kubelet that reconnects stops an evicted
 * pod's containers, at once for a container that stops on SIGTERM (the sample server does) and within the pod's grace
 * period (30 s by default) for one that does not, so the reading waits until no container of an evicted pod runs, at
 * most 60 s.
 */
async function afterKills(real: LabInfo['nodes'], evicted: { pod: string }[]): Promise<{ states: RealRuntimeState[]; at: string }> {
  const gone = new Set(evicted.map((e) => e.pod));
  const deadline = realClock.now() + 60_000;
  for (;;) {
    const states = await Promise.all(real.map(readRealRuntime));
    const left = states.flatMap((s) => s.containers).filter((c) => c.running && gone.has(`${c.namespace}/${c.pod}`));
    if (!left.length || realClock.now() > deadline) return { states, at: new Date(realClock.now()).toISOString() };
    await realClock.sleep(1000);
  }
}

/** Where each pod runs (namespace/name → node), read before the run: the controller's log names pods, not nodes. */
async function podNodes(lab: LabInfo): Promise<Map<string, string>> {
  const { createKubeAccess } = await import('kube-runbook/internal/kube/client.js');
  const kube = createKubeAccess({ kubeconfig: lab.kubeconfig, context: lab.context });
  try {
    const list = await kube.json!<{ items: { metadata: { namespace: string; name: string }; spec?: { nodeName?: string } }[] }>(
      '/api/v1/pods',
      {
        timeoutMs: 10_000,
      },
    );
    return new Map(list.items.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p.spec?.nodeName ?? '(unscheduled)']));
  } finally {
    kube.close?.();
  }
}

async function readyNodes(lab: LabInfo): Promise<string> {
  const { createKubeAccess } = await import('kube-runbook/internal/kube/client.js');
  const kube = createKubeAccess({ kubeconfig: lab.kubeconfig, context: lab.context });
  try {
    const list = await kube.json!<{ items: { status?: { conditions?: { type: string; status: string }[] } }[] }>('/api/v1/nodes', {
      timeoutMs: 10_000,
    });
    const ready = list.items.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
    return `${ready}/${list.items.length}`;
  } catch {
    return 'unknown';
  } finally {
    kube.close?.();
  }
}

const time = (iso?: string) => (iso ? iso.slice(11, 23) : '—');

export function renderOutcome(o: Outcome): string {
  const r = o.report;
  const faults = r.faults.filter((f) => !f.remediation);
  const remediations = r.faults.filter((f) => f.remediation);
  const lines = [
    `${o.label}: ${r.status.toUpperCase()} (exit ${o.exitCode}) — ${r.reason}`,
    `  pods evicted:        ${o.evicted.length}${o.evicted.length ? ` (first at ${time(o.evicted.map((e) => e.at).sort()[0])})` : ''}, counted from the controller-manager's log`,
    `  containers killed:   ${o.killed.length}${o.restarted ? ` (${o.restarted} restarted)` : ''}${o.killed.length ? `: ${o.killed.map((k) => `${k.pod} on ${k.node}`).join(', ')}` : ''}`,
    `                       counted by ${o.killedFrom}${o.killedFrom.startsWith('containerd') ? `; ${o.realContainersAtStart} running at the start` : ''}`,
    `  faults reverted:     ${faults.filter((f) => f.status === 'reverted').length}/${faults.length}` +
      (remediations.length
        ? `; remediations applied ${remediations.length}, undone ${remediations.filter((f) => f.status === 'reverted').length}`
        : ''),
    `  nodes Ready at end:  ${o.readyAtEnd}`,
  ];
  const fired = r.guardFirings.find((g) => g.response === 'remediate' || g.response === 'abort');
  if (o.predicted) {
    const first = o.evicted.map((e) => e.at).sort()[0];
    const diff = first ? Date.parse(first) - Date.parse(o.predicted.at) : undefined;
    lines.push(
      `  forecast:            first eviction predicted for ${time(o.predicted.at)} (${o.predicted.pod})` +
        (first && diff !== undefined
          ? `; the controller evicted at ${time(first)} (forecast ${formatDuration(Math.abs(diff))} ${diff >= 0 ? 'early' : 'LATE'})`
          : '; nothing was evicted'),
    );
  }
  if (fired) lines.push(`  guard:               ${fired.guard} → ${fired.response} at ${time(fired.at)}: ${fired.detail}`);
  for (const obj of r.objectives ?? [])
    lines.push(
      `  objective:           ${obj.name}: ${obj.status === 'met' ? `met, recovered ${formatDuration(obj.recoveryMs ?? 0)} after the revert` : obj.status.toUpperCase()} (within ${formatDuration(obj.withinMs)})` +
        (obj.nodes?.maxMs === undefined
          ? ''
          : `; per node p50 ${formatDuration(obj.nodes.p50Ms!)}, max ${formatDuration(obj.nodes.maxMs)} (${obj.nodes.slowest})`),
    );
  lines.push(`  timeline:            ${join(o.reportDir, 'timeline.html')} (report.json, junit.xml beside it)`);
  return lines.join('\n');
}

export const register: Register = (program, done) => {
  program
    .command('demo')
    .description(
      'Prepare the local lab (building Kubernetes once; three real nodes where this machine can run them, else simulated ones), run ' +
        'runbooks/apiserver-outage.yaml with guards, print the outcome (containers killed as the runtime counts them), tear the lab down.',
    )
    .option('--compare', 'also run it without guards, to see the cascade the guards prevent')
    .option('--keep', 'leave the lab running afterwards')
    .option('--simulated', 'run the lab on simulated nodes even where this machine can run real ones')
    .option('--instance <name>', 'lab instance', 'demo')
    .option(
      '--kubernetes-version <version>',
      `the lab's Kubernetes: ${SUPPORTED_MINORS.map((m) => `1.${m}`).join(', ')} (default 1.${DEFAULT_MINOR})`,
    )
    .action(async (o: { compare?: boolean; keep?: boolean; simulated?: boolean; instance: string; kubernetesVersion?: string }) => {
      const log = createLogger((_level, msg) => out.stderr(`lab: ${msg}`));
      out.stdout('Preparing the lab (the first time, Kubernetes is built once into the cache: about 10 minutes)…');
      const binaries = await ensureLabBinaries({ log, kubernetesVersion: o.kubernetesVersion });
      // real nodes where this machine runs them (the checks of `lab up --real-nodes`), so kills are the runtime's
      const choice = o.simulated ? { real: false as const, reason: '--simulated asked for them' } : await chooseNodes(binaries, { log });
      out.stdout(
        choice.real
          ? "Nodes: 3 real nodes (the release's kubelet, containerd 2 and runc); containers killed are counted by their containerd"
          : `Nodes: 3 simulated nodes, because ${choice.reason}; containers killed are counted from the simulator's records`,
      );
      await labDown(o.instance);
      const outcomes: Outcome[] = [];
      try {
        const lab = await labUp({ instance: o.instance, ...(choice.real ? { nodes: 0, realNodes: 3 } : { nodes: 3 }), binaries, log });
        out.stdout(`\nKubernetes ${binaries.version}`);
        out.stdout(`\n▶ runbooks/apiserver-outage.yaml, with its guards\n`);
        outcomes.push(await runAndMeasure(lab, RUNBOOK, true));
        if (o.compare) {
          out.stdout(`\n▶ runbooks/apiserver-outage.yaml again, with --no-guards\n`);
          outcomes.push(await runAndMeasure(lab, RUNBOOK, false));
        }
      } finally {
        if (!o.keep) await labDown(o.instance);
      }
      out.stdout(`\nOutcome\n${outcomes.map(renderOutcome).join('\n\n')}`);
      if (o.keep)
        out.stdout(
          `\nThe lab is still running: eval "$(kube-runbook-lab env --instance ${o.instance})"; remove it with kube-runbook-lab down --instance ${o.instance}`,
        );
      const guarded = outcomes[0]!;
      const safe = guarded.evicted.length === 0 && guarded.killed.length === 0 && guarded.report.remaining.length === 0;
      done(safe ? EXIT.ok : EXIT.failed);
    });
};
