import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { askPerson, notConfirmed } from './consent.js';
import type { McpDeps } from './deps.js';
import { answer, guarded } from './sink.js';

/** The client's name, as the halt records who set or cleared it (beside this machine's user). */
const clientOf = (server: McpServer) => server.server.getClientVersion()?.name ?? 'an MCP client';

/**
 * `halt`, always there (without --allow-runs too) and without a question: all it can do is stop, every run of the
 * cluster rolling back and none starting, which is never the harm a model could be talked into. Resuming is a
 * change like a run: only with --allow-runs, and only after the person's yes.
 */
export function registerHaltTools(server: McpServer, deps: McpDeps, allowRuns: boolean): void {
  server.registerTool(
    'halt',
    {
      title: 'Halt all chaos',
      description:
        'Stops every run of the cluster at once, whatever its lock namespace (`kube-runbook halt`: sets the Lease ' +
        'kube-system/kube-runbook-halt, which every run and node agent follows): each rolls back, none starts until a person resumes; ' +
        'node agents of silent executors fire their dead-men. When the cluster does not answer, this machine’s runs are stopped directly.',
      inputSchema: { reason: z.string().min(1).max(500).describe('why, as every run and `kube-runbook status` will say it') },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    ({ reason }) => guarded(async () => answer(await deps.halt(reason, clientOf(server)), undefined, { decision: 'halted' })),
  );
  if (!allowRuns) return;
  server.registerTool(
    'resume_runs',
    {
      title: 'Clear the halt (asks the user first)',
      description:
        'Clears the cluster’s halt (`kube-runbook resume`: the Lease kube-system/kube-runbook-halt) after the user confirms in a form the client shows: runs may start again.',
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    () =>
      guarded(async () => {
        const consent = await askPerson(
          server,
          `Clear the halt? ${(await deps.haltState()).line}\nRuns may start again once it is cleared.`,
        );
        if (!consent.given) return notConfirmed(consent);
        return answer(await deps.resume(clientOf(server)), undefined, { decision: 'cleared the halt', consent: consent.answered });
      }),
  );
}
