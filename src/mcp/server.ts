import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { toolVersion } from '../core/version.js';
import { auditCalls } from './call-audit.js';
import type { CallLog } from './call-log.js';
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

/** What the server is run with besides its dependencies and options. */
export interface McpRuntime {
  /** Its clock (names of report directories). */
  now?: () => Date;
  /** Where each call is logged with its decision (stderr, `--log FILE`, telemetry); none in tests that do not look. */
  calls?: CallLog;
}

/**
 * The MCP server of `kube-runbook mcp`: read-only tools and halt always, run, recover and resume only with `allowRuns`,
 * the shipped runbooks, schemas and the last report as resources, two prompts. `deps` is everything it reads and
 * starts; every tool call, resource read and prompt goes to `calls` with what was decided.
 */
export function createMcpServer(deps: McpDeps, o: McpOptions, rt: McpRuntime = {}): McpServer {
  const now = rt.now ?? (() => new Date());
  const server = new McpServer({ name: 'kube-runbook', version: toolVersion() }, { instructions: INSTRUCTIONS });
  if (rt.calls) auditCalls(server, rt.calls); // before anything is registered: it wraps the handlers as they are installed
  const catalog = new RunbookCatalog(o.runbooks, process.cwd());
  registerReadTools(server, deps, catalog);
  registerHaltTools(server, deps, o.allowRuns);
  if (o.allowRuns) registerRunTools(server, deps, catalog, o, now);
  registerResources(server, deps, o.packageDir);
  registerPrompts(server);
  return server;
}
