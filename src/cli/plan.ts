import { Option } from 'commander';
import { EXIT } from '../core/errors.js';
import { realClock } from '../core/clock.js';
import { renderPlan } from '../report/plan-text.js';
import { out } from './output.js';
import { prepare, stderrLogger } from './setup.js';
import type { Register } from './types.js';

export const register: Register = (program, done) => {
  program
    .command('plan')
    .description('Print the resolved steps, guards, remediation and rollback order of a runbook; touches nothing.')
    .argument('<runbook>', 'runbook file')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--kubeconfig <file>', 'kubeconfig (default: the inventory\'s, else $KUBECONFIG)')
    .option('--context <name>', 'kubeconfig context')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (file: string, o: { inventory?: string; kubeconfig?: string; context?: string; output: string }) => {
      const log = stderrLogger(false);
      const p = await prepare(file, o, realClock, log);
      p.kube?.close?.();
      if (o.output === 'json') {
        out.stdout(
          JSON.stringify(
            {
              runbook: p.plan.runbook.metadata.name,
              context: p.kube?.contextName ?? null,
              steps: p.plan.steps.map(function strip(s): unknown {
                if (s.kind === 'action') return { index: s.index, name: s.name, kind: s.kind, action: s.actionId, params: s.params, targets: s.targets?.map((t) => t.name) ?? null };
                if (s.kind === 'expect') return { index: s.index, name: s.name, kind: s.kind, probe: s.probeId, params: s.params, status: s.status, withinMs: s.withinMs };
                if (s.kind === 'parallel') return { index: s.index, name: s.name, kind: s.kind, children: s.children.map(strip) };
                return s;
              }),
              guards: p.plan.guards.map((g) => ({ name: g.name, probe: g.probeId, params: g.params, onViolation: g.onViolation, onUnknown: g.onUnknown, unknownForMs: g.unknownForMs })),
              remediation: p.plan.remediation.map((r) => ({ index: r.index, action: r.actionId, params: r.params, targets: r.targets?.map((t) => t.name) ?? null })),
            },
            null,
            2,
          ),
        );
      } else {
        out.stdout(renderPlan(p.plan, p.kube?.contextName));
        out.stdout(p.kube ? 'Nothing was touched.' : `Nothing was touched. (cluster not reachable: ${p.kubeError?.message ?? 'no kubeconfig'})`);
      }
      done(EXIT.ok);
    });
};
