import { Option } from 'commander';
import { stringify } from 'yaml';
import { EXIT, KrError } from '../core/errors.js';
import { redactStrings, redactText } from '../core/redact.js';
import { realClock } from '../core/clock.js';
import { planAccessAnyServer, rbacRules } from '../engine/access.js';
import { defaultRegistry } from '../engine/registry.js';
import { sensitiveGrants } from '../engine/sensitive-access.js';
import { planJson } from '../report/plan-json.js';
import { renderPlan } from '../report/plan-text.js';
import { out, stderrLogger } from './output.js';
import { type FileProblems, pairProblems, problemLine } from './pair.js';
import { haltLine } from './halt.js';
import { runObservers } from '../session/observers.js';
import { loadInputs, planOn } from './setup.js';
import { reachCluster } from './cluster.js';
import type { CommandHelp, Register } from './types.js';

export const register: Register = (program, done) => {
  program
    .command('plan')
    .description('Print the resolved steps, guards, remediation and rollback order of a runbook; touches nothing.')
    .argument('<runbook>', 'runbook file')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--kubeconfig <file>', "kubeconfig (default: the inventory's, else $KUBECONFIG)")
    .option('--context <name>', 'kubeconfig context')
    .addOption(
      new Option(
        '--offline',
        'plan without a cluster: no connection is tried; label selectors and version fallbacks (orElse) stay unresolved',
      ).conflicts(['kubeconfig', 'context']),
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json', 'yaml']).default('text'))
    .action(async (file: string, o: { inventory?: string; kubeconfig?: string; context?: string; offline?: boolean; output: string }) => {
      const [loaded, inv] = await loadInputs(file, o);
      // without a cluster, every check that needs none, printed as `validate RUNBOOK INVENTORY` prints them: what the
      // plan is refused for (exit 2), then what preflight would refuse a run for (the plan is still printed)
      if (o.offline) {
        const print = (found: FileProblems[]) => {
          for (const f of found) for (const p of f.problems) out.stderr(redactText(problemLine(f.file, p)));
          return found.length > 0;
        };
        if (print(await pairProblems(loaded, inv, 'plan'))) return done(EXIT.invalid);
        print(await pairProblems(loaded, inv, 'preflight'));
      }
      const cluster = await reachCluster(o, inv, realClock, stderrLogger(false));
      const halted = cluster.kube && !cluster.error && (await haltLine(cluster.kube, loaded.runbook.spec.safety.lockNamespace));
      cluster.kube?.close?.();
      if (cluster.error)
        throw new KrError(cluster.error.code, `cannot plan: ${cluster.error.message}`, {
          exit: EXIT.refused,
          cause: cluster.error,
          details: ['nothing was touched; `plan --offline` plans without a cluster'],
        });
      const plan = await planOn(file, loaded, inv, cluster);
      // what `kube-runbook manifests` would grant that gives more than it reads like
      const sensitive = sensitiveGrants(rbacRules(await planAccessAnyServer(plan, defaultRegistry, await runObservers())));
      if (o.output !== 'text') {
        const data = redactStrings(planJson(plan, { context: cluster.kube?.contextName ?? null, offline: o.offline === true, sensitive }));
        out.stdout(o.output === 'json' ? JSON.stringify(data, null, 2) : stringify(data));
        if (halted && halted.warn) out.stderr(redactText(halted.line));
      } else {
        out.stdout(redactText(renderPlan(plan, cluster.kube?.contextName)));
        if (sensitive.length)
          out.stdout(
            [
              '',
              'Sensitive permissions the run needs (preflight checks them, `kube-runbook manifests` grants them; see docs/security.md):',
              ...sensitive.map((g) => `  - ${g.grant}: ${g.why}`),
            ].join('\n'),
          );
        if (halted) out.stdout(redactText(halted.line));
        out.stdout(o.offline ? 'Planned offline: no cluster was contacted. Nothing was touched.' : 'Nothing was touched.');
      }
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Run',
  examples: [
    ['plan runbook.yaml -i inventory.yaml', 'the resolved steps, guards, remediation and rollback order'],
    ['plan runbook.yaml -i inventory.yaml -o json', 'the same as JSON (schema/plan.schema.json)'],
  ],
};
