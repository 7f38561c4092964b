import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { EXIT, KrError, quote } from '../core/errors.js';
import { plannedActions } from '../engine/plan.js';
import type { Plan } from '../engine/plan.js';
import { renderPlan } from '../report/plan-text.js';
import type { RunbookCatalog } from './catalog.js';
import type { McpDeps } from './deps.js';
import { pickReport } from './reports.js';
import { reportText } from './report-text.js';
import { answer, guarded } from './sink.js';
import { journaledRuns } from './status.js';

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;
const READS_CLUSTER = { ...READ_ONLY, openWorldHint: true } as const;

/** The nodes a plan's faults and remediations act on, and the cluster-wide ones, by name. */
export function planTargets(plan: Plan): { nodes: string[]; clusterWide: string[] } {
  const actions = [...plannedActions(plan), ...plan.remediation];
  const nodes = new Set(actions.flatMap((a) => a.targets?.map((t) => t.name) ?? []));
  const clusterWide = actions.filter((a) => a.action.meta.targets === 'cluster').map((a) => a.actionId);
  return { nodes: [...nodes].sort(), clusterWide: [...new Set(clusterWide)] };
}

/** The tools that read and never change anything: always there, whatever the server was started with. */
export function registerReadTools(server: McpServer, deps: McpDeps, catalog: RunbookCatalog): void {
  registerModuleTools(server, deps);
  registerRunbookTools(server, deps, catalog);
  registerClusterTools(server, deps);
}

/** What the tool offers: its actions and probes. */
function registerModuleTools(server: McpServer, deps: McpDeps): void {
  server.registerTool(
    'list_modules',
    {
      title: 'List actions and probes',
      description: 'Every action (fault, remediation) and probe (observer, guard) with its summary.',
      annotations: READ_ONLY,
    },
    () =>
      guarded(async () => {
        const m = await deps.modules();
        const lines = (kind: string, l: { id: string; summary: string }[]) => [`${kind}:`, ...l.map((x) => `  ${x.id}: ${x.summary}`)];
        return answer([...lines('actions', m.actions), ...lines('probes', m.probes)].join('\n'));
      }),
  );

  server.registerTool(
    'describe_module',
    {
      title: 'Describe an action or a probe',
      description:
        "An action's or a probe's parameters, an example `with:` block, layouts, how it is undone, and the API permissions it needs.",
      inputSchema: { id: z.string().min(1).max(100).describe('an action or probe id (see list_modules)') },
      annotations: READ_ONLY,
    },
    ({ id }) =>
      guarded(async () => {
        const found = await deps.describe(id);
        if (!found.length)
          throw new KrError('UNKNOWN_MODULE', `no action or probe is called ${quote(id)} (see list_modules)`, { exit: EXIT.invalid });
        return answer(`${id}:`, found.length === 1 ? found[0] : found);
      }),
  );
}

/** The runbooks the server was started with: listed, validated, planned. */
function registerRunbookTools(server: McpServer, deps: McpDeps, catalog: RunbookCatalog): void {
  server.registerTool(
    'list_runbooks',
    {
      title: 'List the runbooks offered',
      description: 'The runbooks this server was started with, by name: the only ones the other tools plan, validate or run.',
      annotations: READ_ONLY,
    },
    () =>
      guarded(async () =>
        answer(catalog.names().length ? catalog.names().join('\n') : 'none: start the server with --runbooks DIR|FILE...'),
      ),
  );

  const runbook = { runbook: z.string().min(1).max(200).describe('a runbook name from list_runbooks') };

  server.registerTool(
    'validate_runbook',
    {
      title: 'Validate a runbook',
      description:
        'Checks a runbook (and, when the server has an inventory, the runbook against it) without a cluster, as `kube-runbook validate` does: problems as FILE:LINE:COL.',
      inputSchema: runbook,
      annotations: READ_ONLY,
    },
    ({ runbook: name }) =>
      guarded(async () => {
        const results = await deps.validate(catalog.file(name));
        const lines = results.flatMap((r) => [
          r.ok ? `ok ${r.file}${r.summary ? ` (${r.summary})` : ''}` : `INVALID ${r.file}`,
          ...r.problems,
          ...r.warnings.map((w) => `warning: ${w}`),
        ]);
        return answer(lines.join('\n'));
      }),
  );

  server.registerTool(
    'plan_runbook',
    {
      title: 'Plan a runbook',
      description:
        'The resolved steps, targets, guards, remediation and rollback order of a runbook on the server’s cluster, and each API permission the run needs checked ' +
        'with a SelfSubjectAccessReview (as preflight does). Touches nothing.',
      inputSchema: runbook,
      annotations: READS_CLUSTER,
    },
    ({ runbook: name }) =>
      guarded(async () => {
        const p = await deps.plan(catalog.file(name));
        const t = planTargets(p.plan);
        const denied = p.access.filter((a) => a.allowed !== true);
        const rbac = p.clusterError
          ? `RBAC: not checked: ${p.clusterError}`
          : denied.length
            ? [
                'RBAC: a run would be refused; not allowed:',
                ...denied.map((a) => `  - ${a.check} (for ${a.by.join(', ')})${a.error ? `: ${a.error}` : ''}`),
              ].join('\n')
            : `RBAC: all ${p.access.length} permission(s) the run needs are granted`;
        return answer(
          [
            renderPlan(p.plan, p.context ?? undefined),
            '',
            `Targets: ${t.nodes.length ? t.nodes.join(', ') : 'no nodes'}${t.clusterWide.length ? `; cluster-wide: ${t.clusterWide.join(', ')}` : ''}`,
            rbac,
            'Nothing was touched.',
          ].join('\n'),
        );
      }),
  );
}

/** What the cluster and this machine's runs say now: the forecast, the heartbeat audit, runs and their reports. */
function registerClusterTools(server: McpServer, deps: McpDeps): void {
  server.registerTool(
    'eviction_forecast',
    {
      title: 'Eviction forecast now',
      description:
        "One reading of the eviction forecast on the server's cluster: per failing node when it goes NotReady, per pod the earliest eviction, zones, and whether evictions are frozen.",
      annotations: READS_CLUSTER,
    },
    () =>
      guarded(async () => {
        const r = await deps.forecast();
        return answer(`eviction forecast: ${r.status}: ${r.detail}`, r.value);
      }),
  );

  server.registerTool(
    'audit_heartbeats',
    {
      title: 'Audit heartbeat settings',
      description:
        "`kube-runbook audit`: the cluster's grace period against lease renewals, monitor period, eviction rates and etcd latency, each pass, warn, fail or unknown.",
      annotations: READS_CLUSTER,
    },
    () => guarded(async () => answer('heartbeat audit:', await deps.audit())),
  );

  server.registerTool(
    'run_status',
    {
      title: 'Runs and the run lock',
      description:
        'The runs journaled on this machine (how each ended, what it may have left applied) and who holds the cluster-wide run lock of the server’s context.',
      annotations: READS_CLUSTER,
    },
    () =>
      guarded(async () => {
        let lock: unknown;
        try {
          lock = (await deps.runLock()) ?? 'free';
        } catch (e) {
          lock = `unknown: ${(e as Error).message}`;
        }
        return answer('runs on this machine (newest first) and the run lock:', { runLock: lock, runs: journaledRuns(deps.runsDir()) });
      }),
  );

  server.registerTool(
    'read_report',
    {
      title: 'Read a run report',
      description:
        'A report of a run this server started: the summary, the recovery objectives and the timeline as text (the newest when none is named).',
      inputSchema: { report: z.string().min(1).max(200).optional().describe('the name run_runbook gave the run; the newest when absent') },
      annotations: READ_ONLY,
    },
    ({ report }) =>
      guarded(async () => {
        const saved = pickReport(deps.reportsDir(), report);
        return answer(`report ${saved.name}:\n${reportText(await deps.readReport(saved.file))}`);
      }),
  );
}
