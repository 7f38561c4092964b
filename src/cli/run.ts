import { resolve } from 'node:path';
import { Option } from 'commander';
import { EXIT, type ExitCode, KrError, messageOf, quote } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { exitCodesText } from './help.js';
import type { KubeAccess } from '../kube/types.js';
import { realClock } from '../core/clock.js';
import { assumeYes, nobody, terminalConfirmer, type Confirmer } from '../engine/confirm.js';
import type { ObserverProbe } from '../engine/access.js';
import { Journal } from '../engine/journal.js';
import { defaultRegistry } from '../engine/registry.js';
import { allowsEveryContext } from '../engine/contexts.js';
import { preflight } from '../engine/preflight.js';
import { startRun } from '../engine/run.js';
import { toSinks } from '../engine/sinks.js';
import { runsDir } from '../engine/state-dir.js';
import type { LoadedRunbook } from '../runbook/load.js';
import { ReportCollector } from '../report/collect.js';
import { liveRenderer } from '../report/live.js';
import { renderPlan } from '../report/plan-text.js';
import { plainRenderer } from '../report/plain.js';
import { out } from './output.js';
import { configMapRef, type ConfigMapRef } from '../kube/journal-configmap.js';
import { configMapCopy, prepareJournalConfigMap } from './journal-copy.js';
import { redactedReport, writeReports } from './report-files.js';
import { forwardSignals } from './signals.js';
import { otelSettings } from '../telemetry/settings.js';
import { startTelemetry } from '../telemetry/telemetry.js';
import { kubeconfigPath, makeCtx, newRunId, prepare, stderrLogger } from './setup.js';
import type { CommandHelp, Register } from './types.js';

/**
 * What every run watches for its report (report.json: observations), guards or not: the pods deleted during the
 * run with their causes, and the eviction forecast's prediction, to compare with what happened; and every node's
 * Lease, Ready condition and NoExecute taints, for the timeline's node lanes (report.json: nodes). They share the
 * forecast's watches.
 */
const POD_DELETIONS = 'pods deleted';
const FORECAST = 'eviction forecast';
/** The probes every run starts for its report, by the name the report gives them; each says what the report keeps of its readings (`meta.report`). */
const OBSERVERS: Record<string, { probe: string; with: Record<string, unknown> }> = {
  [POD_DELETIONS]: { probe: 'pod-deletions', with: {} },
  'node leases': { probe: 'node-leases', with: {} },
  'node ready': { probe: 'node-ready', with: {} },
  'NoExecute taints': { probe: 'noexecute-taints', with: {} },
  [FORECAST]: { probe: 'eviction-forecast', with: { margin: '0s' } },
};

/** The probes every run starts for its report; their permissions are checked at preflight and granted by `manifests`. */
export function runObservers(): Promise<ObserverProbe[]> {
  return Promise.all(
    Object.entries(OBSERVERS).map(async ([name, o]) => {
      const probe = await defaultRegistry.probe(o.probe);
      return { name, probe, params: probe.meta.params.parse(o.with) as Record<string, unknown> };
    }),
  );
}

/**
 * A runbook that allows every context runs only against a context named on the command line (`--context`, or
 * `--in-cluster`), never against whatever the kubeconfig's current context happens to be.
 */
function requireNamedContext(loaded: LoadedRunbook, flags: RunFlags): void {
  if (flags.context !== undefined || flags.inCluster) return;
  const i = loaded.runbook.spec.safety.allowContexts.findIndex((p) => allowsEveryContext(p));
  if (i < 0) return;
  const pattern = loaded.runbook.spec.safety.allowContexts[i]!;
  throw new KrError(
    'CONTEXT_NOT_NAMED',
    `${loaded.where(['spec', 'safety', 'allowContexts', i])}: spec.safety.allowContexts[${i}]: ${quote(pattern)} allows every context: ` +
      `name the one to run against with --context NAME (the kubeconfig's current context is not taken for it)`,
    { exit: EXIT.invalid },
  );
}

interface RunFlags {
  inventory?: string;
  kubeconfig?: string;
  context?: string;
  inCluster?: boolean;
  reportConfigmap?: string;
  journalConfigmap?: string;
  yes?: boolean;
  dryRun?: boolean;
  reportDir?: string;
  stateDir?: string;
  output: 'text' | 'json';
  guards: boolean;
  verbose?: boolean;
  otelEndpoint?: string;
  otelHeadersOverHttp?: boolean;
}

export const register: Register = (program, done) => {
  program
    .command('run')
    .description('Run a runbook: preflight, steps with guards, remediation, and rollback always.')
    .argument('<runbook>', 'runbook file')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--kubeconfig <file>', "kubeconfig (default: the inventory's, else $KUBECONFIG)")
    .option('--context <name>', 'kubeconfig context (must be allowed by spec.safety.allowContexts)')
    .option('--in-cluster', "use the pod's ServiceAccount, not a kubeconfig; its context is `in-cluster` (see docs/in-cluster.md)")
    .option('--report-configmap <namespace/name>', 'also write report.json to this ConfigMap (server-side apply)')
    .option(
      '--journal-configmap <namespace/name>',
      'also keep the journal in this existing ConfigMap as it is written, for `recover --from-cluster` (see docs/in-cluster.md)',
    )
    .option('-y, --yes', 'answer yes to every confirm step (for CI and scripts)')
    .option('--dry-run', 'print what would happen and execute nothing')
    .option(
      '--state-dir <dir>',
      'where the journal goes (default: $KUBE_RUNBOOK_STATE_DIR, else $XDG_STATE_HOME/kube-runbook, else ~/.local/state/kube-runbook)',
    )
    .option('--report-dir <dir>', 'write report.json, junit.xml and timeline.html there')
    .addOption(new Option('-o, --output <format>', 'text: live view; json: the report on stdout').choices(['text', 'json']).default('text'))
    .option('--no-guards', 'do not start the guards (to see what happens without the safety net)')
    .option(
      '--otel-endpoint <url>',
      'export the run as one OpenTelemetry trace and its metrics over OTLP/HTTP to this base URL (e.g. http://127.0.0.1:4318); ' +
        'wins over OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables, which turn export on by themselves (see docs/telemetry.md)',
    )
    .option(
      '--otel-headers-over-http',
      "send OTEL_EXPORTER_OTLP_HEADERS (and a URL's user:password@) to a plain http:// collector too; refused without it (see docs/security.md)",
    )
    .option('-v, --verbose', 'debug logging on stderr')
    .action(async (file: string, flags: RunFlags) => done(...(await runCommand(file, flags))));
};

async function runCommand(file: string, flags: RunFlags): Promise<[ExitCode, { now: boolean }?]> {
  const log = stderrLogger(Boolean(flags.verbose));
  const clock = realClock;
  const otel = otelSettings(process.env, { endpoint: flags.otelEndpoint, headersOverHttp: flags.otelHeadersOverHttp });
  const reportCm = flags.reportConfigmap === undefined ? undefined : configMapRef('--report-configmap', flags.reportConfigmap);
  const journalCm = flags.journalConfigmap === undefined ? undefined : configMapRef('--journal-configmap', flags.journalConfigmap);
  const p = await prepare(file, flags, clock, log, (loaded) => requireNamedContext(loaded, flags));
  if (!p.kube && !flags.dryRun) throw p.kubeError ?? new KrError('KUBE_UNAVAILABLE', 'no cluster to run against', { exit: EXIT.refused });
  const confirmer: Confirmer = flags.yes
    ? assumeYes
    : process.stdin.isTTY
      ? terminalConfirmer(process.stdin, process.stderr, clock)
      : nobody;
  const runId = newRunId(p.plan.runbook.metadata.name, clock.now());
  if (flags.dryRun) {
    // the whole preflight, which only reads: what a real run would be refused for, the dry run is refused for too
    out.stdout(`DRY RUN: nothing is executed.\n\n${renderPlan(p.plan, p.kube?.contextName)}\n\nPreflight (read-only):`);
    if (!p.kube) {
      out.stdout(`  preflight FAIL cluster: ${p.kubeError?.message ?? 'no cluster to run against'}`);
      return [EXIT.refused];
    }
    const ctx = makeCtx({
      runId,
      clock,
      log,
      signal: new AbortController().signal,
      inventory: p.inv.inventory,
      kube: p.kube,
      dryRun: true,
    });
    const pf = await preflight(p.plan, ctx, confirmer, toSinks(plainRenderer((l) => out.stdout(`  ${l}`)))).finally(() =>
      p.kube?.close?.(),
    );
    out.stdout(
      pf.ok ? '\nPreflight passed: a run would start.' : redactText(`\nREFUSED: a run would be refused: ${pf.failures.join('; ')}`),
    );
    return [pf.ok ? EXIT.ok : EXIT.refused];
  }
  const kube = p.kube!;
  // checked before anything is applied: a run that cannot keep its journal in the cluster does not start
  const copies = journalCm && (await prepareJournalConfigMap(kube, journalCm));
  if (journalCm && copies) {
    const cm = `ConfigMap ${journalCm.namespace}/${journalCm.name}`;
    for (const earlier of copies.applied)
      log.warn(
        `run ${earlier.runId} left ${earlier.faults} fault(s) applied, by its journal in ${cm} ` +
          `(its pod went away): revert them with kube-runbook recover --from-cluster ${journalCm.namespace}/${journalCm.name}`,
      );
    for (const runId of copies.unsigned)
      log.warn(`the journal of run ${runId} in ${cm} is not signed by the journal's key: recover --from-cluster refuses it`);
  }
  const dir = runsDir(process.env, flags.stateDir === undefined ? undefined : resolve(flags.stateDir));
  const journal = Journal.forRun(runId, dir, journalCm && copies && configMapCopy(kube, journalCm, runId, log, copies.key));
  const observers = await runObservers();
  const collector = new ReportCollector(
    Object.fromEntries(observers.flatMap((o) => (o.probe.meta.report ? [[o.name, (v: unknown) => o.probe.meta.report!(v)]] : []))),
  );
  // the live task list redraws the screen: with confirmations to answer, a line per event reads better
  const tty = flags.output === 'text' && process.stdout.isTTY === true && !(p.plan.confirms && !flags.yes);
  const write = (line: string) => (flags.output === 'json' ? process.stderr : process.stdout).write(`${line}\n`);
  const view = tty ? liveRenderer(p.plan) : { onEvent: plainRenderer(write), stop: async () => {} };
  const telemetry =
    otel &&
    startTelemetry({
      settings: otel,
      target: { clusterHost: serverHost(kube.server), nodes: p.inv.inventory.spec.nodes.map((n) => n.name) },
      clock,
      warn: (line) => out.stderr(line),
    });
  // every sink takes the run's events only through here: redacted once, then shown, kept and sent
  const emit = toSinks(collector.onEvent, view.onEvent, telemetry?.onEvent);
  const ctx = makeCtx({ runId, clock, log, signal: new AbortController().signal, inventory: p.inv.inventory, kube });
  const handle = startRun({
    plan: p.plan,
    ctx,
    journal,
    emit,
    confirmer,
    inventoryFile: resolve(p.inv.file),
    kubeconfig: kubeconfigPath(flags, p.inv),
    guards: flags.guards,
    observers,
  });
  const stopForwarding = forwardSignals((sig) => handle.interrupt(sig));
  const result = await handle.result;
  stopForwarding();
  // the journal's last records (the reverts, the end) in the cluster's copy too, unless stopped at once
  if (journalCm && !result.forced && !(await journal.synced()))
    out.stderr(
      `kube-runbook: the journal's copy in ConfigMap ${journalCm.namespace}/${journalCm.name} lacks the last records; the local journal ${journal.file} has them`,
    );
  await view.stop();
  // a second Ctrl-C stops at once: what is still queued is dropped
  if (!result.forced) await telemetry?.shutdown();
  if (reportCm) {
    try {
      await writeReportConfigMap(kube, reportCm, redactedReport(collector.report));
    } catch (e) {
      out.stderr(`kube-runbook: the report was not written to ConfigMap ${reportCm.namespace}/${reportCm.name}: ${messageOf(e)}`);
    }
  }
  kube.close?.();
  if (flags.reportDir) writeReports(resolve(flags.reportDir), collector.report);
  if (flags.output === 'json') out.stdout(JSON.stringify(redactedReport(collector.report), null, 2));
  else {
    const seen = collector.report.observations[POD_DELETIONS] as { detail?: string } | undefined;
    out.stdout(`Pods deleted during the run: ${seen?.detail ?? 'unknown (the pod watch never synced)'}`);
  }
  if (result.remaining.length) {
    out.stderr(`\n${result.remaining.length} fault(s) may still be applied:`);
    for (const f of result.remaining)
      out.stderr(
        redactText(
          `  - ${f.action}${f.node ? ` on ${f.node}` : ''} (${f.faultId})${f.manualRevert ? `\n    by hand on the node:\n${indent(f.manualRevert, '      ')}` : ''}`,
        ),
      );
    out.stderr(`Revert them with: ${result.recoverCommand}`);
  }
  // a second Ctrl-C stops at once: do not wait for work still in flight
  return [result.exitCode as ExitCode, { now: result.forced === true }];
}

/** The report as `report.json` of a ConfigMap, by server-side apply (replaced; needs patch, and create when it does not exist yet). */
async function writeReportConfigMap(kube: KubeAccess, ref: ConfigMapRef, report: unknown): Promise<void> {
  await kube.json!(`/api/v1/namespaces/${ref.namespace}/configmaps/${ref.name}`, {
    method: 'PATCH',
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: 'kube-runbook', force: true },
    body: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: ref.name, namespace: ref.namespace },
      data: { 'report.json': JSON.stringify(report, null, 2) },
    },
    timeoutMs: 30_000,
  });
}

/** The apiserver's host and port, as the trace names the cluster: nothing of the URL's user or path. */
const serverHost = (server: string) => {
  try {
    return new URL(server).host;
  } catch {
    return undefined;
  }
};

const indent = (text: string, pad: string) =>
  text
    .trim()
    .split('\n')
    .map((l) => pad + l)
    .join('\n');

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Run',
  examples: [
    ['run runbooks/kubelet-partition.yaml -i inventory.yaml', "run a runbook against the inventory's cluster, asking at each confirm step"],
    ['run runbook.yaml -i inventory.yaml --dry-run', 'show what would happen, touching nothing'],
    [
      'run runbook.yaml -i inventory.yaml --yes -o json --report-dir out',
      'in CI: no prompts, the report on stdout, and report.json, junit.xml and timeline.html in out/',
    ],
  ],
  more: exitCodesText,
};
