import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { McpDeps } from './deps.js';
import { pickReport } from './reports.js';
import { reportText } from './report-text.js';
import { safeData, safeText } from './sink.js';

/** Files under DIR ending in EXT, as paths relative to DIR, sorted. */
function filesUnder(dir: string, ext: string): string[] {
  try {
    return readdirSync(dir, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith(ext))
      .sort();
  } catch {
    return [];
  }
}

/**
 * What the server hands as resources: the shipped runbooks (runbooks/**.yaml), the JSON Schemas (schema/*.json), and
 * the last report of a run it started. Fixed URIs, each listed; nothing else of the disk is reachable through them.
 */
export function registerResources(server: McpServer, deps: McpDeps, packageDir: string): void {
  const runbooksDir = join(packageDir, 'runbooks');
  for (const f of filesUnder(runbooksDir, '.yaml')) {
    const uri = `kube-runbook://runbooks/${f}`;
    server.registerResource(`runbook ${f}`, uri, { title: `shipped runbook ${f}`, mimeType: 'application/yaml' }, () => ({
      contents: [{ uri, mimeType: 'application/yaml', text: safeText(readFileSync(join(runbooksDir, f), 'utf8')) }],
    }));
  }
  const schemaDir = join(packageDir, 'schema');
  for (const f of filesUnder(schemaDir, '.schema.json')) {
    const uri = `kube-runbook://schema/${f}`;
    server.registerResource(`schema ${f}`, uri, { title: `JSON Schema ${f}`, mimeType: 'application/schema+json' }, () => ({
      contents: [{ uri, mimeType: 'application/schema+json', text: safeText(readFileSync(join(schemaDir, f), 'utf8')) }],
    }));
  }
  const last = 'kube-runbook://reports/last';
  server.registerResource(
    'last report',
    last,
    { title: 'the last report of a run this server started', mimeType: 'text/plain' },
    async () => {
      const saved = pickReport(deps.reportsDir(), undefined);
      const report = await deps.readReport(saved.file);
      return {
        contents: [
          {
            uri: last,
            mimeType: 'text/plain',
            text: safeText(`report ${saved.name} (${relative(deps.reportsDir(), saved.file)}):\n${reportText(report)}`),
          },
          { uri: `${last}.json`, mimeType: 'application/json', text: safeData(report) },
        ],
      };
    },
  );
}

/** The prompts: a cascade check of the cluster now, and a game day planned from one runbook. */
export function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'cascade-check',
    {
      title: 'Is this cluster about to cascade?',
      description: 'Reads the eviction forecast and audits the heartbeat settings, and says what they mean.',
    },
    () => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text:
              'Is this Kubernetes cluster about to cascade into evictions? Call eviction_forecast and audit_heartbeats. ' +
              'Say which nodes are failing, when the first pod would be evicted and whether evictions are frozen; then which ' +
              'heartbeat settings fail or warn (grace period against lease renewals, eviction rates, etcd latency) and what that risks. ' +
              'Change nothing; if something must be done, name the runbook (list_runbooks) and say that a person has to confirm it.',
          },
        },
      ],
    }),
  );
  server.registerPrompt(
    'plan-game-day',
    {
      title: 'Plan a game day from a runbook',
      description: 'Validates and plans one of the offered runbooks and writes the game day around it.',
      argsSchema: { runbook: z.string().describe('a runbook name from list_runbooks') },
    },
    ({ runbook }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text: safeText(
              `Plan a game day from the runbook ${JSON.stringify(runbook)}. Call validate_runbook and plan_runbook for it, ` +
                'describe_module for each action and probe it uses, eviction_forecast and audit_heartbeats for the steady state. ' +
                'Write: the hypothesis, the steady state, the faults and their targets, the guards and what each stops, the ' +
                'blast radius, the rollback order, the permissions the run needs that are missing, and the go/no-go checks. ' +
                'Do not start the run: a person starts it, and confirms it.',
            ),
          },
        },
      ],
    }),
  );
}
