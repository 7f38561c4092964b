import { hostname, userInfo } from 'node:os';
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { type Clock, realClock } from '../core/clock.js';
import { formatDuration, parseDuration } from '../core/duration.js';
import { EXIT, type ExitCode, KrError, messageOf, quote } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { redactText } from '../core/redact.js';
import {
  describeHalt,
  haltFlag,
  HALT_NAME,
  haltLeases,
  HALT_NAMESPACE,
  haltNamespaces,
  type HaltWrite,
  type HaltWriteOptions,
  readHalts,
  setHalt,
} from '../kube/halt.js';
import type { KubeAccess } from '../kube/types.js';
import { localRuns, type LocalRun, type ProcessProbe, realProcesses, stopLocalRuns } from '../engine/local-runs.js';
import { runsDir } from '../journal/state-dir.js';
import { out, stderrLogger } from './output.js';
import { connect } from './cluster.js';
import type { CommandHelp, Register } from './types.js';

/** The flags `halt`, `resume` and `status` share: the cluster, the halt's namespace, the output. */
export interface HaltFlags {
  kubeconfig?: string;
  context?: string;
  inCluster?: boolean;
  namespace: string;
  output: 'text' | 'json';
  by?: string;
  within: string;
  stateDir?: string;
}

export function haltOptions(cmd: Command, write: boolean): Command {
  cmd
    .option('--kubeconfig <file>', 'kubeconfig (default: $KUBECONFIG, else ~/.kube/config)')
    .option('--context <name>', 'kubeconfig context (default: the current one)')
    .option('--in-cluster', "use the pod's ServiceAccount, not a kubeconfig")
    .option(
      '-n, --namespace <ns>',
      "a run lock's namespace (runbooks' spec.safety.lockNamespace) whose own halt stops only the runs locked there (default: the cluster's halt, which stops every run)",
      HALT_NAMESPACE,
    )
    .option(
      '--state-dir <dir>',
      "where this machine's runs keep their journals (default: $KUBE_RUNBOOK_STATE_DIR, else $XDG_STATE_HOME/kube-runbook, else ~/.local/state/kube-runbook)",
    )
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'));
  if (write)
    cmd
      .option('--by <name>', 'who, as recorded (default: USER@HOST)')
      .option('--within <duration>', 'how long the write is tried through an apiserver failing', '30s');
  return cmd;
}

/** How `halt`, `resume` and `status` reach the cluster and this machine's processes (tests give fakes). */
export interface HaltDeps {
  kube: (o: HaltFlags) => KubeAccess;
  clock: Clock;
  log: Logger;
  processes: ProcessProbe;
  kill?: (pid: number, signal: NodeJS.Signals) => void;
}

export const realHaltDeps = (): HaltDeps => ({
  kube: (o) => connect(o, undefined, realClock, stderrLogger(false)),
  clock: realClock,
  log: stderrLogger(false),
  processes: realProcesses,
});

export function whoAmI(given?: string): string {
  if (given) return given;
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return `unknown@${hostname()}`;
  }
}

export function withinMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0)
    throw new KrError('BAD_DURATION', `--within: expected a duration such as 30s or 2m (got ${quote(text)})`, { exit: EXIT.invalid });
  return ms;
}

export const localRunsOf = (o: Pick<HaltFlags, 'stateDir'>, processes: ProcessProbe) =>
  localRuns(runsDir(process.env, o.stateDir === undefined ? undefined : resolve(o.stateDir)), processes);

/**
 * Writes the halt Lease (`halt` or `resume`) through the cluster, tried for `withinMs` and a warning on each failed try;
 * what was written, or the error that stopped it. The cluster's client is closed after.
 */
export async function writeHalt(
  o: HaltFlags,
  deps: HaltDeps,
  what: 'halt' | 'resume',
  withinMs: number,
  write: (kube: KubeAccess, w: Omit<HaltWriteOptions, 'by'>) => Promise<HaltWrite>,
): Promise<{ written?: HaltWrite; error?: string }> {
  let kube: KubeAccess | undefined;
  try {
    kube = deps.kube(o);
    const written = await write(kube, {
      namespace: o.namespace,
      clock: deps.clock,
      withinMs,
      onFailure: (f) =>
        deps.log.warn(
          `${what} not written yet (${f.error})${f.retryInMs === undefined ? '' : `; trying again in ${formatDuration(f.retryInMs)}`}`,
        ),
    });
    return { written };
  } catch (e) {
    return { error: messageOf(e) };
  } finally {
    kube?.close?.();
  }
}

/** `kube-runbook halt`: sets the halt (and with --local stops this machine's runs); prints one line; its exit code. */
export async function haltCommand(o: HaltFlags & { reason: string; local?: boolean }, deps: HaltDeps): Promise<ExitCode> {
  const within = withinMs(o.within);
  const by = whoAmI(o.by);
  // this machine's runs first: they stop even if the cluster does not answer
  const local = o.local ? stopLocalRuns(localRunsOf(o, deps.processes).runs, deps.kill) : undefined;
  const { written, error } = await writeHalt(o, deps, 'halt', within, (kube, w) => setHalt(kube, { ...w, by, reason: o.reason }));
  const halt = written?.state.halt;
  if (o.output === 'json')
    out.stdout(
      JSON.stringify(
        {
          halted: Boolean(halt),
          already: written?.already ?? false,
          namespace: o.namespace,
          ...(halt ? { by: halt.by, reason: redactText(halt.reason), since: halt.since } : {}),
          ...(error ? { error: redactText(error) } : {}),
          ...(local ? { local: { stopped: local.stopped.map(json), failed: local.failed } } : {}),
        },
        null,
        2,
      ),
    );
  else {
    const stopped = local ? `; ${localLine(local)}` : '';
    if (halt)
      out.stdout(
        redactText(
          `${written?.already ? 'already ' : ''}${describeHalt(o.namespace, halt)}: ${o.namespace === HALT_NAMESPACE ? 'every run rolls back, none starts' : `the runs locked in ${o.namespace} roll back, none of them starts`} until kube-runbook resume${haltFlag(o.namespace)}${stopped}`,
        ),
      );
    else out.stdout(redactText(`NOT HALTED: ${error ?? 'unknown'}${stopped}`));
  }
  return halt ? EXIT.ok : EXIT.failed;
}

const json = (r: LocalRun) => ({ runId: r.runId, pid: r.pid, runbook: r.runbook });

function localLine(l: ReturnType<typeof stopLocalRuns>): string {
  const stopped = l.stopped.length
    ? `SIGTERM sent to ${l.stopped.map((r) => `run ${r.runId} (pid ${r.pid})`).join(', ')} on this machine`
    : 'no run running on this machine';
  return l.failed.length ? `${stopped}; could not signal ${l.failed.join(', ')}` : stopped;
}

/**
 * For `plan`, the halts that stop a run locked in `lockNamespace`: the one set (a run would be refused), or which
 * `halt` commands stop it, or that they cannot be read; `warn` for the first and last (told beside JSON too).
 */
export async function haltLine(kube: KubeAccess, lockNamespace: string): Promise<{ line: string; warn: boolean }> {
  const namespaces = haltNamespaces(lockNamespace);
  try {
    const set = (await readHalts(kube, lockNamespace, { timeoutMs: 10_000 })).find((h) => h.halt);
    if (set?.halt)
      return {
        line: `HALTED: ${describeHalt(set.namespace, set.halt)}; a run is refused until kube-runbook resume${haltFlag(set.namespace)}`,
        warn: true,
      };
    const also = namespaces.length > 1 ? `, as does \`kube-runbook halt -n ${lockNamespace}\`` : '';
    return { line: `halt: not set (${haltLeases(namespaces)}); \`kube-runbook halt\` stops this run${also}`, warn: false };
  } catch (e) {
    return {
      line: `the halt (${haltLeases(namespaces)}) could not be read: ${messageOf(e)}; a run's preflight reads it again`,
      warn: true,
    };
  }
}

export const register: Register = (program, done) => {
  haltOptions(
    program
      .command('halt')
      .description(
        `Stop all chaos at once: every run of the cluster rolls back, no run starts, node agents fire their dead-men (Lease ${HALT_NAMESPACE}/${HALT_NAME}; -n NS: only the runs locked in NS).`,
      )
      .requiredOption('--reason <text>', 'why, as every run and `status` will say it')
      .option('--local', "also stop this machine's runs directly (SIGTERM: they roll back), whether or not the cluster answers"),
    true,
  ).action(async (o: HaltFlags & { reason: string; local?: boolean }) => done(await haltCommand(o, realHaltDeps())));
};

export const help: CommandHelp = {
  group: 'Run',
  examples: [
    [
      'halt --reason "payments outage" --context prod',
      'every run on prod rolls back now, whatever its lock namespace, and none starts until resume',
    ],
    ['halt --reason "team A only" -n team-a', 'only the runs locked in team-a (spec.safety.lockNamespace) roll back'],
    ['halt --reason "apiserver down" --local', "also SIGTERM this machine's runs, should the cluster not answer"],
    ['halt --reason outage -o json', 'the same, as JSON'],
  ],
};
