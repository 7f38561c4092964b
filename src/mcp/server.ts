import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { toolVersion } from '../core/version.js';
import { RunbookCatalog } from './catalog.js';
import type { McpDeps, McpOptions } from './deps.js';
import { registerHaltTools } from './halt-tools.js';
import { registerReadTools } from './read-tools.js';
import { registerPrompts, registerResources } from './resources.js';
import { registerRunTools } from './run-tools.js';

const INSTRUCTIONS =
  'kube-runbook: chaos-engineering runbooks for Kubernetes with guards that stop eviction cascades. ' +
  'The read-only tools read, forecast and plan; halt stops every run at once. Runs, recovers and resuming exist only when the ' +
  'server was started with --allow-runs, and each asks the user to confirm in a form; nothing starts on the model’s word alone.';

/**
 * The MCP server of `kube-runbook mcp`: read-only tools and halt always, run, recover and resume only with `allowRuns`,
 * the shipped runbooks, schemas and the last report as resources, two prompts. `deps` is everything it reads and
 * starts; `now` its clock (names of report directories).
 */
export function createMcpServer(deps: McpDeps, o: McpOptions, now: () => Date = () => new Date()): McpServer {
  const server = new McpServer({ name: 'kube-runbook', version: toolVersion() }, { instructions: INSTRUCTIONS });
  const catalog = new RunbookCatalog(o.runbooks, process.cwd());
  registerReadTools(server, deps, catalog);
  registerHaltTools(server, deps, o.allowRuns);
  if (o.allowRuns) registerRunTools(server, deps, catalog, o, now);
  registerResources(server, deps, o.packageDir);
  registerPrompts(server);
  return server;
}
