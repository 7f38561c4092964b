import { resolve } from 'node:path';
import { Option } from 'commander';
import { realClock } from '../core/clock.js';
import { EXIT, type ExitCode, KrError } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { assumeYes, type Confirmer, nobody, terminalConfirmer } from '../engine/confirm.js';
import { runsDir } from '../journal/state-dir.js';
import { renderPlan } from '../report/plan-text.js';
import { redactedReport } from '../session/report-files.js';
import { dryRunSession, runSession, type SessionOptions } from '../session/session.js';
import { type OtelSettings, otelSettings } from '../telemetry/settings.js';
import { configMapRef } from './configmap-flag.js';
import { exitCodesText } from './help.js';
import { out, stderrLogger } from './output.js';
import { forwardSignals } from './signals.js';
import { setUpRun } from './setup.js';
import type { ClusterOptions } from './cluster.js';
import type { CommandHelp, Register } from './types.js';

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

/** What `run`'s flags ask for, each checked before anything is read: the cluster, the mode, where the state and the report go. */
interface RunOptions {
  cluster: ClusterOptions;
  verbose: boolean;
  dryRun: boolean;
  yes: boolean;
  guards: boolean;
  output: 'text' | 'json';
  journal: SessionOptions['journal'];
  report: SessionOptions['report'];
  otel?: OtelSettings;
}

function runOptions(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): RunOptions {
  const otel = otelSettings(env, { endpoint: flags.otelEndpoint, headersOverHttp: flags.otelHeadersOverHttp });
  const reportCm = flags.reportConfigmap === undefined ? undefined : configMapRef('--report-configmap', flags.reportConfigmap);
  const journalCm = flags.journalConfigmap === undefined ? undefined : configMapRef('--journal-configmap', flags.journalConfigmap);
  return {
    cluster: { inventory: flags.inventory, kubeconfig: flags.kubeconfig, context: flags.context, inCluster: flags.inCluster },
    verbose: flags.verbose === true,
    dryRun: flags.dryRun === true,
    yes: flags.yes === true,
    guards: flags.guards,
    output: flags.output,
    journal: { dir: runsDir(env, flags.stateDir === undefined ? undefined : resolve(flags.stateDir)), configMap: journalCm },
    report: { dir: flags.reportDir === undefined ? undefined : resolve(flags.reportDir), configMap: reportCm },
    otel,
  };
}

async function runCommand(file: string, flags: RunFlags): Promise<[ExitCode, { now: boolean }?]> {
  const o = runOptions(flags);
  const clock = realClock;
  const log = stderrLogger(o.verbose);
  const run = await setUpRun(file, { cluster: o.cluster, dryRun: o.dryRun, clock, log });
  if (!run.ctx && !o.dryRun) throw run.kubeError ?? new KrError('KUBE_UNAVAILABLE', 'no cluster to run against', { exit: EXIT.refused });
  const confirmer: Confirmer = o.yes ? assumeYes : process.stdin.isTTY ? terminalConfirmer(process.stdin, process.stderr, clock) : nobody;
  if (o.dryRun || !run.ctx) {
    out.stdout(`DRY RUN: nothing is executed.\n\n${renderPlan(run.plan, run.ctx?.kube.contextName)}\n\nPreflight (read-only):`);
    if (!run.ctx) {
      out.stdout(`  preflight FAIL cluster: ${run.kubeError?.message ?? 'no cluster to run against'}`);
      return [EXIT.refused];
    }
    const pf = await dryRunSession({ plan: run.plan, ctx: run.ctx, confirmer, write: (l) => out.stdout(`  ${l}`) });
    out.stdout(
      pf.ok ? '\nPreflight passed: a run would start.' : redactText(`\nREFUSED: a run would be refused: ${pf.failures.join('; ')}`),
    );
    return [pf.ok ? EXIT.ok : EXIT.refused];
  }
  const { result, report, podsDeleted } = await runSession({
    plan: run.plan,
    ctx: run.ctx,
    confirmer,
    inventoryFile: run.inventoryFile,
    kubeconfig: run.ctx.kube.source?.kubeconfig,
    guards: o.guards,
    journal: o.journal,
    report: o.report,
    // the live task list redraws the screen: with confirmations to answer, a line per event reads better
    view:
      o.output === 'text' && process.stdout.isTTY === true && !(run.plan.confirms && !o.yes)
        ? { live: true }
        : { live: false, write: (line) => (o.output === 'json' ? process.stderr : process.stdout).write(`${line}\n`) },
    otel: o.otel,
    warn: (line) => out.stderr(line),
    interrupts: forwardSignals,
  });
  if (o.output === 'json') out.stdout(JSON.stringify(redactedReport(report), null, 2));
  else out.stdout(`Pods deleted during the run: ${podsDeleted ?? 'unknown (the pod watch never synced)'}`);
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
