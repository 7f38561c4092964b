import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { formatDuration } from '../core/duration.js';
import { EXIT, KrError, quote } from '../core/errors.js';
import { listJournals, outstanding, readJournal } from '../journal/journal.js';
import type { RunbookCatalog } from './catalog.js';
import { askPerson, notConfirmed } from './consent.js';
import type { McpDeps, McpOptions } from './deps.js';
import { planTargets } from './read-tools.js';
import { answer, guarded, refusal } from './sink.js';

const CHANGES = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true } as const;

/** The server's cluster flags, passed on to the process it starts as they were given to it. */
function clusterArgs(o: McpOptions): string[] {
  return [
    ...(o.inventory === undefined ? [] : ['--inventory', o.inventory]),
    ...(o.kubeconfig === undefined ? [] : ['--kubeconfig', o.kubeconfig]),
    ...(o.context === undefined ? [] : ['--context', o.context]),
  ];
}

/** A directory of its own for a process the server starts: its report and its output. */
function newRunDir(deps: McpDeps, what: string, now: Date): { name: string; dir: string } {
  const name = `${now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}-${what.slice(0, 40)}-${randomBytes(2).toString('hex')}`;
  const dir = join(deps.reportsDir(), name);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return { name, dir };
}

/** A run id as journals name them: nothing an argument parser could take for an option. */
const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/;

/**
 * The tools that change a cluster, there only with `--allow-runs`: each is planned read-only first, then asks the
 * person (MCP elicitation, a yes/no form naming the runbook, context, targets and blast radius) and is refused
 * without a yes or where the client cannot ask; then it runs as `kube-runbook run|recover` in a process of its own, so
 * every preflight, allowContexts, blast-radius and run-lock rule applies exactly as on the command line.
 */
export function registerRunTools(server: McpServer, deps: McpDeps, catalog: RunbookCatalog, o: McpOptions, now: () => Date): void {
  server.registerTool(
    'run_runbook',
    {
      title: 'Run a runbook (asks the user first)',
      description:
        'Runs one of the offered runbooks against the server’s context, after the user confirms in a form the client shows. ' +
        'Preflight, allowContexts, blast radius and the run lock apply as on the command line; guards and rollback always. ' +
        'Returns at once with the name of its report; follow it with run_status and read_report.',
      inputSchema: { runbook: z.string().min(1).max(200).describe('a runbook name from list_runbooks') },
      annotations: CHANGES,
    },
    ({ runbook: name }) =>
      guarded(async () => {
        const file = catalog.file(name);
        const halt = await deps.haltState();
        if (halt.halted) return refusal(`refused: ${halt.line}; no run starts until a person resumes`, 'HALTED');
        const p = await deps.plan(file);
        if (p.clusterError) return refusal(`refused: the cluster cannot be used: ${p.clusterError}`, 'KUBE_UNAVAILABLE');
        const denied = p.access.filter((a) => a.allowed !== true);
        if (denied.length)
          return refusal(`refused: preflight would refuse the run; not allowed: ${denied.map((a) => a.check).join('; ')}`, 'RBAC_DENIED');
        if (p.plan.confirms)
          return refusal(
            `refused: runbook ${name} asks for confirmation at its steps, which only a terminal answers: run it with \`kube-runbook run ${file}\``,
            'CONFIRM_STEPS',
          );
        const t = planTargets(p.plan);
        const s = p.plan.safety;
        const consent = await askPerson(
          server,
          [
            `Run the runbook ${quote(p.plan.runbook.metadata.name)} (${file}) against context ${quote(p.context)}?`,
            `It applies faults to nodes: ${t.nodes.join(', ') || 'none'}${t.clusterWide.length ? `; cluster-wide: ${t.clusterWide.join(', ')}` : ''}.`,
            `Blast radius: at most ${s.maxUnavailable === undefined ? 'the runbook’s default' : JSON.stringify(s.maxUnavailable)} nodes unavailable; ` +
              `each fault reverts itself on its node after ${formatDuration(s.faultTtl)} if the executor is gone; the run stops after ${formatDuration(s.maxDuration)}.`,
            `Guards: ${p.plan.guards.map((g) => `${g.probeId} (${g.onViolation})`).join(', ') || 'none'}. Rollback always.`,
          ].join('\n'),
        );
        if (!consent.given) return notConfirmed(consent);
        const { name: handle, dir } = newRunDir(deps, name, now());
        const launched = await deps.launch(['run', file, ...clusterArgs(o), '--report-dir', dir, '-o', 'json'], dir);
        return answer(
          `run of ${name} started on context ${quote(p.context)} (process ${launched.pid}); its report will be ${handle}: ` +
            'follow it with run_status, read it with read_report once it ends; halt stops it.',
          undefined,
          { decision: `launched run ${handle} (process ${launched.pid})`, consent: consent.answered },
        );
      }),
  );

  server.registerTool(
    'recover_run',
    {
      title: 'Recover a run (asks the user first)',
      description:
        'Reverts what a run journaled on this machine left applied (`kube-runbook recover RUN_ID`, never --force), after the user confirms in a form the client shows.',
      inputSchema: { run: z.string().regex(RUN_ID).describe('a run id from run_status') },
      annotations: CHANGES,
    },
    ({ run }) =>
      guarded(async () => {
        const file = listJournals(deps.runsDir()).find((f) => basename(f, '.jsonl') === run);
        if (!file)
          throw new KrError('RUN_NOT_FOUND', `no run ${quote(run)} is journaled on this machine (see run_status)`, { exit: EXIT.invalid });
        const v = readJournal(file);
        const left = outstanding(v);
        const consent = await askPerson(
          server,
          [
            `Recover run ${v.run.runId} of runbook ${quote(v.run.runbookName)} on context ${quote(v.run.context)}?`,
            left.length
              ? `It reverts ${left.length} fault(s) it may have left applied: ${left.map((f) => `${f.prepared.action}${f.prepared.node ? ` on ${f.prepared.node}` : ''}`).join(', ')}.`
              : 'Its journal shows nothing left applied (its node agents may remain: recover removes them).',
            'Remediations are undone only once the runbook’s rollback condition holds.',
          ].join('\n'),
        );
        if (!consent.given) return notConfirmed(consent);
        const { name: handle, dir } = newRunDir(deps, `recover-${v.run.runbookName}`, now());
        const args = [
          'recover',
          run,
          ...(o.kubeconfig === undefined ? [] : ['--kubeconfig', o.kubeconfig]),
          ...(o.context === undefined ? [] : ['--context', o.context]),
        ];
        const launched = await deps.launch(args, dir);
        return answer(
          `recover of run ${run} started (process ${launched.pid}); its output goes to ${handle}/output.log; run_status shows what remains.`,
          undefined,
          { decision: `launched recover of run ${run} (process ${launched.pid})`, consent: consent.answered },
        );
      }),
  );
}
