import { resolve } from 'node:path';
import { Option } from 'commander';
import { stringify } from 'yaml';
import { EXIT, KrError } from '../core/errors.js';
import { readDocumentFile } from '../document/read-file.js';
import { createKubeAccess } from '../kube/client.js';
import { renderJUnit } from '../report/junit.js';
import { MAX_REPORT_BYTES, parseReport } from '../report/load.js';
import { reportSummary } from '../report/summary.js';
import { renderTimeline } from '../report/timeline.js';
import { configMapRef } from './configmap-flag.js';
import { out, stderrLogger } from './output.js';
import { readReportConfigMap } from '../session/report-configmap.js';
import { redactedReport, writePrivate } from '../session/report-files.js';
import type { CommandHelp, Register } from './types.js';

interface ReportFlags {
  fromConfigmap?: string;
  html?: string;
  junit?: string;
  json?: string;
  output: 'text' | 'json' | 'yaml';
  kubeconfig?: string;
  context?: string;
  inCluster?: boolean;
}

/** The report's text and the name its problems are told under: a file, or `configmap NS/NAME`. */
async function source(file: string | undefined, o: ReportFlags): Promise<{ text: string; name: string }> {
  if ((file === undefined) === (o.fromConfigmap === undefined))
    throw new KrError('REPORT_SOURCE', 'give a report.json file or --from-configmap NAMESPACE/NAME (one of them)', { exit: EXIT.invalid });
  if (file !== undefined) return { text: (await readDocumentFile(file, MAX_REPORT_BYTES)).toString('utf8'), name: file };
  const ref = configMapRef('--from-configmap', o.fromConfigmap!);
  const kube = createKubeAccess({ kubeconfig: o.kubeconfig, context: o.context, inCluster: o.inCluster, log: stderrLogger(false) });
  try {
    return await readReportConfigMap(kube, ref);
  } finally {
    kube.close?.();
  }
}

/** `report [FILE] [--from-configmap NS/NAME] [--html OUT] [--junit OUT] [-o text|json|yaml]`: a saved run's report, rendered again. */
export const register: Register = (program, done) => {
  program
    .command('report')
    .description(
      "Render a saved run's report.json again: the timeline page, JUnit, or a one-line summary (a report kept in a log or a ConfigMap).",
    )
    .argument('[file]', "the run's report.json")
    .option('--from-configmap <namespace/name>', 'read report.json from this ConfigMap (run --report-configmap: in-cluster runs)')
    .option('--html <file>', 'write the timeline page here')
    .option('--junit <file>', 'write the JUnit XML here')
    .addOption(
      new Option('-o, --output <format>', 'text: one line on the run; json, yaml: the report (checked, redacted) on stdout')
        .choices(['text', 'json', 'yaml'])
        .default('text'),
    )
    .option('--json <file>', 'write the report (checked, redacted) here (deprecated: -o json > FILE)')
    .option('--kubeconfig <file>', 'kubeconfig for --from-configmap')
    .option('--context <name>', 'kubeconfig context for --from-configmap')
    .option('--in-cluster', "use the pod's ServiceAccount for --from-configmap")
    .action(async (file: string | undefined, o: ReportFlags) => {
      if (o.json !== undefined) out.stderr('kube-runbook: report --json FILE is deprecated: use -o json > FILE');
      const { text, name } = await source(file, o);
      const report = redactedReport(parseReport(text, name));
      const outputs: [string | undefined, () => string][] = [
        [o.html, () => renderTimeline(report)],
        [o.junit, () => renderJUnit(report)],
        [o.json, () => `${JSON.stringify(report, null, 2)}\n`],
      ];
      // with -o json|yaml, stdout is the report alone: what was written is said on stderr
      const said = o.output === 'text' ? out.stdout : out.stderr;
      for (const [to, render] of outputs)
        if (to !== undefined) {
          writePrivate(resolve(to), render());
          said(`wrote ${to}`);
        }
      if (o.output === 'json') out.stdout(JSON.stringify(report, null, 2));
      else if (o.output === 'yaml') out.stdout(stringify(report));
      else if (outputs.every(([to]) => to === undefined)) out.stdout(reportSummary(report));
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['report out/report.json', "show a run's report again"],
    ['report out/report.json --html timeline.html --junit junit.xml', 'write its timeline page and JUnit XML'],
    ['report --from-configmap kube-runbook/nightly-report', 'the report of a run that ran in the cluster'],
    ['report out/report.json -o json', 'the report itself, checked and redacted, on stdout'],
  ],
};
