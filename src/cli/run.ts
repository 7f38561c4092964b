import { resolve } from 'node:path';
import { Option } from 'commander';
import { realClock } from '../core/clock.js';
import { EXIT, type ExitCode, KrError, quote } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { assumeYes, type Confirmer, nobody, terminalConfirmer } from '../engine/confirm.js';
import { allowsEveryContext } from '../engine/contexts.js';
import { runsDir } from '../journal/state-dir.js';
import { configMapRef } from '../kube/configmap.js';
import { renderPlan } from '../report/plan-text.js';
import type { LoadedRunbook } from '../runbook/load.js';
import { redactedReport } from '../session/report-files.js';
import { dryRunSession, runSession } from '../session/session.js';
import { otelSettings } from '../telemetry/settings.js';
import { exitCodesText } from './help.js';
import { out } from './output.js';
import { forwardSignals } from './signals.js';
import { kubeconfigPath, makeCtx, newRunId, prepare, stderrLogger } from './setup.js';
import type { CommandHelp, Register } from './types.js';

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
  if (flags.dryRun) out.stdout(`DRY RUN: nothing is executed.\n\n${renderPlan(p.plan, p.kube?.contextName)}\n\nPreflight (read-only):`);
  if (!p.kube) {
    out.stdout(`  preflight FAIL cluster: ${p.kubeError?.message ?? 'no cluster to run against'}`);
    return [EXIT.refused];
  }
  const kubeconfig = kubeconfigPath(flags, p.inv);
  const ctx = makeCtx({
    runId,
    clock,
    log,
    signal: new AbortController().signal,
    inventory: p.inv.inventory,
    kube: p.kube,
    dryRun: flags.dryRun,
  });
  if (flags.dryRun) {
    const pf = await dryRunSession({ plan: p.plan, ctx, confirmer, write: (l) => out.stdout(`  ${l}`) });
    out.stdout(
      pf.ok ? '\nPreflight passed: a run would start.' : redactText(`\nREFUSED: a run would be refused: ${pf.failures.join('; ')}`),
    );
    return [pf.ok ? EXIT.ok : EXIT.refused];
  }
  const { result, report, podsDeleted } = await runSession({
    plan: p.plan,
    ctx,
    confirmer,
    inventoryFile: resolve(p.inv.file),
    kubeconfig,
    guards: flags.guards,
    journal: { dir: runsDir(process.env, flags.stateDir === undefined ? undefined : resolve(flags.stateDir)), configMap: journalCm },
    report: { dir: flags.reportDir === undefined ? undefined : resolve(flags.reportDir), configMap: reportCm },
    // the live task list redraws the screen: with confirmations to answer, a line per event reads better
    view:
      flags.output === 'text' && process.stdout.isTTY === true && !(p.plan.confirms && !flags.yes)
        ? { live: true }
        : { live: false, write: (line) => (flags.output === 'json' ? process.stderr : process.stdout).write(`${line}\n`) },
    otel,
    warn: (line) => out.stderr(line),
    interrupts: forwardSignals,
  });
  if (flags.output === 'json') out.stdout(JSON.stringify(redactedReport(report), null, 2));
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
