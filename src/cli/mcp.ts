import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, Option } from 'commander';
import { realClock } from '../core/clock.js';
import { EXIT, isKrError, KrError, messageOf, quote } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { KubeAccess } from '../kube/types.js';
import { formatProblem } from '../document/problems.js';
import { distinctChecks, planAccess } from '../engine/access.js';
import { selfCommand } from '../engine/exit-watch.js';
import { localRuns, stopLocalRuns } from '../engine/local-runs.js';
import { defaultRegistry } from '../engine/registry.js';
import { runsDir } from '../journal/state-dir.js';
import { describeCheck } from '../contract/access.js';
import type { Reading } from '../contract/probe.js';
import { clearHalt, describeHalt, HALT_NAME, HALT_NAMESPACE, readHalt, setHalt, type HaltWriteOptions } from '../kube/halt.js';
import { currentRunLockHolder } from '../engine/run-lock-lease.js';
import type { McpDeps, McpOptions, Validated } from '../mcp/deps.js';
import { MAX_REPORT_BYTES, parseReport } from '../report/load.js';
import { auditCluster, auditData, bare } from './audit.js';
import { describeData } from './describe.js';
import { whoAmI } from './halt.js';
import { pairProblems } from './pair.js';
import { redactedReport } from '../session/report-files.js';
import { runObservers } from '../session/observers.js';
import { otelSettings, type OtelSettings } from '../telemetry/settings.js';
import { inventoryFrom, loadInputs, planOn } from './setup.js';
import { connect, reachCluster } from './cluster.js';
import { makeCtx } from './ctx.js';
import { expandPaths, validateFile } from './validate.js';
import type { CommandHelp, Register } from './types.js';
import { stderrLogger } from './output.js';

/** The package's root (runbooks/, schema/): dist/cli/ is two folders below it. */
const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** How long the forecast tool waits for the watches to sync before it hands out the reading it has (unknown). */
const FORECAST_WITHIN_MS = 30_000;

interface Flags {
  runbooks?: string[];
  inventory?: string;
  kubeconfig?: string;
  context?: string;
  allowRuns?: boolean;
  http?: number;
  log?: string;
  otelEndpoint?: string;
  otelHeadersOverHttp?: boolean;
  verbose?: boolean;
}

const lines = (file: string, r: Awaited<ReturnType<typeof validateFile>>): Validated => ({
  file,
  ok: r.ok,
  kind: r.kind,
  summary: r.summary,
  problems: r.problems.map((p) =>
    p.line === null ? `${file}: ${p.message}` : formatProblem(file, { ...p, line: p.line, col: p.col ?? 0 }),
  ),
  warnings: r.warnings.map((w) => `${file}:${w.line}:${w.col}: ${w.path ? `${w.path}: ` : ''}${w.message}`),
});

/** The inventory the server was given, or the bare one `audit` uses without one. */
async function inventoryOrBare(f: Flags) {
  return f.inventory || process.env.KUBE_RUNBOOK_INVENTORY ? await inventoryFrom(f) : undefined;
}

/** The first reading of the eviction forecast that is not `unknown`, or the last one when the watches do not sync in time. */
async function forecastNow(f: Flags, log: Logger): Promise<Reading> {
  const inv = await inventoryOrBare(f);
  const kube = connect(f, inv, realClock, log);
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), FORECAST_WITHIN_MS);
  try {
    const ctx = makeCtx({ runId: 'mcp-forecast', clock: realClock, log, signal: stop.signal, inventory: inv?.inventory ?? bare, kube });
    const probe = await defaultRegistry.probe('eviction-forecast');
    let last: Reading | undefined;
    for await (const r of probe.start(ctx, probe.meta.params.parse({}))) {
      last = r;
      if (r.status !== 'unknown') break;
    }
    if (!last)
      throw new KrError('FORECAST_UNKNOWN', `the eviction forecast gave no reading within ${FORECAST_WITHIN_MS / 1000}s`, {
        exit: EXIT.refused,
      });
    return last;
  } finally {
    clearTimeout(timer);
    stop.abort();
    kube.close?.();
  }
}

/** How long a halt or a resume is tried through an apiserver failing, as `halt --within` by default. */
const HALT_WITHIN_MS = 30_000;

/** The cluster of the server's flags, for one use. */
async function withKube<T>(f: Flags, log: Logger, use: (kube: KubeAccess) => Promise<T>): Promise<T> {
  const kube = connect(f, await inventoryOrBare(f), realClock, log);
  try {
    return await use(kube);
  } finally {
    kube.close?.();
  }
}

/** `halt`'s write: its record of who (this machine's user, through the client) and how it is tried. */
const haltWrite = (client: string, log: Logger): HaltWriteOptions => ({
  by: `${whoAmI()} via ${client}`,
  clock: realClock,
  withinMs: HALT_WITHIN_MS,
  onFailure: (x) => log.warn(`halt or resume not written yet (${x.error})`),
});

/**
 * Sets the halt; where it cannot be written, stops this machine's runs (SIGTERM: they roll back, as `halt --local`),
 * and throws HALT_NOT_WRITTEN saying which it stopped.
 */
async function haltNow(f: Flags, log: Logger, reason: string, client: string): Promise<string> {
  try {
    const w = await withKube(f, log, (kube) => setHalt(kube, { ...haltWrite(client, log), reason }));
    return `${w.already ? 'already ' : ''}${describeHalt(w.state.namespace, w.state.halt!)}: every run rolls back, none starts until resumed`;
  } catch (e) {
    const local = stopLocalRuns(localRuns(runsDir(process.env)).runs);
    const stopped = local.stopped.length
      ? `SIGTERM sent to ${local.stopped.map((r) => `run ${r.runId} (pid ${r.pid})`).join(', ')} on this machine: they roll back`
      : 'no run running on this machine';
    throw new KrError(
      'HALT_NOT_WRITTEN',
      `NOT HALTED: ${messageOf(e)}; ${stopped}${local.failed.length ? `; could not signal ${local.failed.join(', ')}` : ''}`,
      {
        exit: EXIT.failed,
      },
    );
  }
}

/** What the server reads and starts: the functions of the CLI's own commands (validate, plan, audit, run, recover). */
function realDeps(f: Flags, log: Logger): McpDeps {
  return {
    modules: async () => {
      const line = async (kind: 'action' | 'probe', id: string) => ({
        id,
        summary: (kind === 'action' ? await defaultRegistry.action(id) : await defaultRegistry.probe(id)).meta.summary,
      });
      return {
        actions: await Promise.all(defaultRegistry.ids('action').map((id) => line('action', id))),
        probes: await Promise.all(defaultRegistry.ids('probe').map((id) => line('probe', id))),
      };
    },
    describe: describeData,
    validate: async (file) => {
      const runbook = await validateFile(file, 'Runbook');
      if (!f.inventory) return [lines(file, runbook)];
      const inventory = await validateFile(f.inventory, 'Inventory');
      if (runbook.loaded?.kind === 'Runbook' && inventory.loaded?.kind === 'Inventory')
        for (const found of await pairProblems(runbook.loaded.value, inventory.loaded.value)) {
          const target = found.file === f.inventory ? inventory : runbook;
          target.ok = false;
          target.problems.push(...found.problems.map((p) => (p.line === 0 ? { ...p, line: null, col: null } : p)));
        }
      return [lines(file, runbook), lines(f.inventory, inventory)];
    },
    plan: async (file) => {
      const [loaded, inv] = await loadInputs(file, f);
      const cluster = await reachCluster(f, inv, realClock, log);
      try {
        const plan = await planOn(file, loaded, inv, cluster);
        const access = [];
        if (cluster.kube && !cluster.error)
          for (const { check, by } of distinctChecks(planAccess(plan, await runObservers()))) {
            try {
              access.push({ check: describeCheck(check), by, allowed: await cluster.kube.canI(check) });
            } catch (e) {
              access.push({ check: describeCheck(check), by, allowed: null, error: (e as Error).message });
            }
          }
        return { plan, context: cluster.kube?.contextName ?? null, clusterError: cluster.error?.message, access };
      } finally {
        cluster.kube?.close?.();
      }
    },
    forecast: () => forecastNow(f, log),
    audit: async () => auditData(await auditCluster(f, log)),
    runLock: async () => {
      const inv = await inventoryOrBare(f);
      const kube = connect(f, inv, realClock, log);
      try {
        const namespace = 'kube-system';
        const holder = await currentRunLockHolder(kube, { namespace, now: () => realClock.now() });
        return holder ? { namespace, ...holder } : null;
      } finally {
        kube.close?.();
      }
    },
    runsDir: () => runsDir(process.env),
    reportsDir: () => join(dirname(runsDir(process.env)), 'mcp'),
    launch: async (args, dir) => {
      const logFd = openSync(join(dir, 'output.log'), 'a', 0o600);
      try {
        // never through a shell: the runbook is a file the server was started with, the rest its own flags
        const self = selfCommand();
        const child = spawn(self.file, [...self.args, ...args], {
          stdio: ['ignore', logFd, logFd],
          env: process.env,
        });
        const exited = new Promise<number | null>((done) => {
          child.once('exit', (code) => done(code));
          child.once('error', () => done(null));
        });
        return { pid: child.pid ?? -1, dir, exited };
      } finally {
        closeSync(logFd);
      }
    },
    halt: (reason, client) => haltNow(f, log, reason, client),
    haltState: () =>
      withKube(f, log, async (kube) => {
        const h = await readHalt(kube, { timeoutMs: 10_000 }).catch((e: unknown) => {
          // as preflight's halt check: a halt that cannot be read refuses the run, it is never taken as "none"
          throw isKrError(e)
            ? e
            : new KrError(
                'HALT_UNREADABLE',
                `refused: cannot read the halt (Lease ${HALT_NAMESPACE}/${HALT_NAME}): ${messageOf(e)}; no run starts until it can be read`,
                { exit: EXIT.refused },
              );
        });
        return {
          halted: h.halt !== undefined,
          line: h.halt ? describeHalt(h.namespace, h.halt) : `no halt is set (Lease ${h.namespace}/${HALT_NAME})`,
        };
      }),
    resume: (client) =>
      withKube(f, log, async (kube) => {
        const w = await clearHalt(kube, haltWrite(client, log));
        const lease = `Lease ${w.state.namespace}/${HALT_NAME}`;
        return w.already
          ? `no halt was set (${lease}): runs may start`
          : `halt cleared by ${whoAmI()} via ${client} (${lease}): runs may start again`;
      }),
    readReport: async (file) => redactedReport(parseReport(readFileSync(file, 'utf8').slice(0, MAX_REPORT_BYTES), file)),
  };
}

/** The server's call log: stderr always, `--log FILE`'s JSON lines, and spans when telemetry is on. */
async function callLog(file: string | undefined, otel: OtelSettings | undefined) {
  const { CallLog, jsonLinesFile } = await import('../mcp/call-log.js');
  const say = (line: string) => void process.stderr.write(`${line}\n`);
  const telemetry =
    otel && (await import('../telemetry/call-trace.js')).startCallTelemetry({ settings: otel, clock: realClock, warn: say });
  return new CallLog({ clock: realClock, say, file: file === undefined ? undefined : jsonLinesFile(resolve(file), say), telemetry });
}

const port = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 65_535) throw new InvalidArgumentError('expected a TCP port (1-65535)');
  return n;
};

/** `mcp`: an MCP server over stdio (or Streamable HTTP on 127.0.0.1), read-only unless `--allow-runs`. */
export const register: Register = (program, done) => {
  program
    .command('mcp')
    .description(
      'Serve AI assistants over MCP (stdio): read, forecast, validate and plan; runs and recovers only with --allow-runs, ' +
        'each confirmed by the user in the client (see docs/mcp.md)',
    )
    .option('--runbooks <paths...>', 'runbook files, or directories to search for .yaml files: the only runbooks the tools plan and run')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--kubeconfig <file>', "kubeconfig (default: the inventory's, else $KUBECONFIG)")
    .option('--context <name>', 'kubeconfig context (needed with --allow-runs: runs go only to a context named here)')
    .option('--allow-runs', 'offer the run and recover tools; each asks the user to confirm in the client, and is refused where it cannot')
    .addOption(
      new Option(
        '--http <port>',
        'serve Streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio (bearer token: $KUBE_RUNBOOK_MCP_TOKEN)',
      ).argParser(port),
    )
    .option('--log <file>', 'also append each tool call, resource read and prompt, with what was decided, to FILE as JSON lines')
    .option(
      '--otel-endpoint <url>',
      'export each call as an OpenTelemetry span over OTLP/HTTP to this base URL (e.g. http://127.0.0.1:4318); ' +
        'wins over OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables, which turn export on by themselves (see docs/mcp.md)',
    )
    .option(
      '--otel-headers-over-http',
      "send OTEL_EXPORTER_OTLP_HEADERS (and a URL's user:password@) to a plain http:// collector too; refused without it (see docs/security.md)",
    )
    .option('-v, --verbose', 'debug logging on stderr')
    .action(async (f: Flags) => {
      if (f.allowRuns && f.context === undefined)
        throw new KrError(
          'CONTEXT_NOT_NAMED',
          '--allow-runs needs --context NAME: runs go only to a context named when the server starts',
          {
            exit: EXIT.invalid,
          },
        );
      const { files, empty } = await expandPaths(f.runbooks ?? []);
      if (empty.length)
        throw new KrError('NO_RUNBOOKS', `no .yaml or .yml files in ${empty.map((d) => quote(d)).join(', ')}`, { exit: EXIT.invalid });
      const log = stderrLogger(f.verbose ?? false);
      const options: McpOptions = {
        runbooks: files.map((x) => resolve(x)),
        inventory: f.inventory === undefined ? undefined : resolve(f.inventory),
        kubeconfig: f.kubeconfig === undefined ? undefined : resolve(f.kubeconfig),
        context: f.context,
        allowRuns: f.allowRuns === true,
        packageDir: PACKAGE_DIR,
      };
      const otel = otelSettings(process.env, {
        endpoint: f.otelEndpoint,
        headersOverHttp: f.otelHeadersOverHttp,
        signals: ['traces'],
        whose: "the MCP server's",
      });
      const deps = realDeps({ ...f, inventory: options.inventory, kubeconfig: options.kubeconfig }, log);
      // loaded here, not with the other commands: every other command starts without the MCP and OpenTelemetry SDKs
      const { createMcpServer } = await import('../mcp/server.js');
      const calls = await callLog(f.log, otel);
      if (f.http !== undefined) {
        const token = process.env.KUBE_RUNBOOK_MCP_TOKEN;
        if (!token || token.length < 16)
          throw new KrError(
            'MCP_TOKEN',
            '--http needs $KUBE_RUNBOOK_MCP_TOKEN, a bearer token of at least 16 characters the client sends',
            {
              exit: EXIT.invalid,
            },
          );
        const { serveHttp } = await import('../mcp/http.js');
        await serveHttp(f.http, token, () => createMcpServer(deps, options, { calls }));
        process.stderr.write(`kube-runbook mcp: serving http://127.0.0.1:${f.http}/mcp\n`);
      } else {
        const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
        const transport = new StdioServerTransport();
        await createMcpServer(deps, options, { calls }).connect(transport);
      }
      await new Promise<void>((stopped) => {
        process.stdin.once('end', () => f.http === undefined && stopped());
        process.once('SIGINT', () => stopped());
        process.once('SIGTERM', () => stopped());
      });
      await calls.close();
      done(EXIT.ok, { now: true });
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Operate',
  examples: [
    ['mcp --runbooks runbooks/ -i inventory.yaml', 'serve an assistant over stdio: read, forecast, validate and plan; change nothing'],
    [
      'mcp --runbooks runbooks/kubelet-partition.yaml -i inventory.yaml --context staging --allow-runs',
      'also run and recover, each after the user confirms in the client',
    ],
  ],
};
