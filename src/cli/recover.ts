import { hostname } from 'node:os';
import { basename, resolve } from 'node:path';
import { agentTargets } from '../engine/agents.js';
import { EXIT, type ExitCode, KrError, messageOf } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { realClock } from '../core/clock.js';
import { toSinks } from '../engine/sinks.js';
import { listJournals, outstanding, readJournal, type JournalView } from '../journal/journal.js';
import { fetchJournalCopies } from '../journal/cluster-copy.js';
import { reopenClusterJournal } from '../session/journal.js';
import { recoverRun } from '../engine/recover.js';
import { defaultRegistry } from '../engine/registry.js';
import { runsDir } from '../journal/state-dir.js';
import type { KubeAccess } from '../kube/types.js';
import { createKubeAccess } from '../kube/client.js';
import { plainRenderer } from '../report/plain.js';
import { configMapRef } from './configmap-flag.js';
import { out, stderrLogger } from './output.js';
import { makeCtx } from './ctx.js';
import type { Logger } from '../core/logger.js';
import type { CommandHelp, Register } from './types.js';

/** A stand-in when the cluster cannot be reached: node faults are still reverted; cluster-side checks fail clearly. */
function offlineKube(context: string, why: string): KubeAccess {
  const fail = async (): Promise<never> => {
    throw new KrError('KUBE_UNAVAILABLE', `the cluster is not reachable: ${why}`, { exit: EXIT.refused });
  };
  return {
    contextName: context,
    server: '',
    get config(): never {
      throw new KrError('KUBE_UNAVAILABLE', `the cluster is not reachable: ${why}`, { exit: EXIT.refused });
    },
    listNodes: fail,
    canI: fail,
    raw: fail,
  };
}

function pick(dir: string, runId: string | undefined, all: boolean): JournalView[] {
  const files = listJournals(dir);
  if (runId) {
    const file = files.find((f) => basename(f, '.jsonl') === runId);
    if (!file)
      throw new KrError(
        'RUN_NOT_FOUND',
        `no journal for run "${runId}" under ${dir}${sudoHint()} (runs: ${
          files
            .slice(0, 10)
            .map((f) => basename(f, '.jsonl'))
            .join(', ') || 'none'
        })`,
        { exit: EXIT.invalid },
      );
    return [readJournal(file)];
  }
  const pending = files
    .flatMap((f) => {
      try {
        return [readJournal(f)];
      } catch (e) {
        out.stderr(`warning: skipping ${f}: ${messageOf(e)}`);
        return [];
      }
    })
    .filter((v) => outstanding(v).length > 0 || agentsLeft(v));
  return all ? pending : pending.slice(0, 1);
}

/** A run that never ended (killed) over node agents may have left their pods, even with every fault reverted. */
function agentsLeft(v: JournalView): boolean {
  return v.status === undefined && agentTargets(v.run.inventory, v.run.inventory.spec.nodes).length > 0 && !runAlive(v);
}

function runAlive(v: JournalView): boolean {
  if (v.run.host !== hostname()) return false;
  try {
    process.kill(v.run.pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Under sudo, the state dir is root's: say where the invoking user's runs are. */
function sudoHint(): string {
  const user = process.env.SUDO_USER;
  if (!user || process.getuid?.() !== 0) return '';
  return ` (running as root through sudo: runs started as ${user} are under ~${user}/.local/state/kube-runbook; pass --state-dir)`;
}

export const register: Register = (program, done) => {
  program
    .command('recover')
    .description('Revert, from its journal, whatever a run left applied (after a crash, SIGKILL or a second Ctrl-C).')
    .argument('[run-id]', 'the run (default: the newest run with something still applied)')
    .option('--all', 'every run with something still applied')
    .option('--force', 'also when the run still seems alive, and undo remediations without waiting for the rollback condition')
    .option(
      '--from-cluster <namespace/name>',
      "also the journals kept in this ConfigMap (run --journal-configmap: in-cluster runs), reverted through this command's cluster",
    )
    .option(
      '--trust-unsigned-journal',
      'with --from-cluster, also take journals copied without a MAC (by versions before journals were signed): only if no one else may write that ConfigMap',
    )
    .option('--in-cluster', "use the pod's ServiceAccount, not a kubeconfig (recover run as a Job)")
    .option('--kubeconfig <file>', 'kubeconfig (default: the one the run used)')
    .option('--context <name>', "kubeconfig context (default: the run's; must be allowed by its runbook's spec.safety.allowContexts)")
    .option(
      '--state-dir <dir>',
      "where the runs' journals are (default: $KUBE_RUNBOOK_STATE_DIR, else $XDG_STATE_HOME/kube-runbook, else ~/.local/state/kube-runbook)",
    )
    .option('-v, --verbose', 'debug logging on stderr')
    .action(async (runId: string | undefined, o: RecoverFlags) => done(await recoverCommand(runId, o)));
};

/** How `recover` reaches the cluster and the nodes (tests give fakes). */
export interface RecoverDeps {
  createKube: typeof createKubeAccess;
  makeCtx: typeof makeCtx;
  log: Logger;
}

/** `kube-runbook recover`: reverts what the runs chosen left applied; its exit code. */
export async function recoverCommand(
  runId: string | undefined,
  o: RecoverFlags,
  deps: RecoverDeps = { createKube: createKubeAccess, makeCtx, log: stderrLogger(Boolean(o.verbose)) },
): Promise<ExitCode> {
  const log = deps.log;
  const dir = runsDir(process.env, o.stateDir === undefined ? undefined : resolve(o.stateDir));
  // the cluster that keeps the journals is the one their faults are reverted through
  const fromCluster = o.fromCluster === undefined ? undefined : configMapRef('--from-cluster', o.fromCluster);
  const shared =
    fromCluster || o.inCluster ? deps.createKube({ kubeconfig: o.kubeconfig, context: o.context, inCluster: o.inCluster, log }) : undefined;
  // checked, every one, before any is taken: a journal that is not the run's own refuses the recover, nothing run
  const copied =
    fromCluster && shared
      ? await fetchJournalCopies(shared, fromCluster, dir, { runId, trustUnsigned: o.trustUnsignedJournal }).catch((e: unknown) => {
          shared.close?.();
          throw e;
        })
      : { runs: new Set<string>(), key: undefined };
  const views = pick(dir, runId, Boolean(o.all));
  if (!views.length) {
    out.stdout(
      `Nothing to recover: no run under ${dir}${fromCluster ? ` or in ConfigMap ${fromCluster.namespace}/${fromCluster.name}` : ''} has a fault still applied.${sudoHint()}`,
    );
    shared?.close?.();
    return EXIT.ok;
  }
  let code: ExitCode = EXIT.ok;
  const render = plainRenderer((l) => out.stdout(l));
  for (const view of views) {
    const todo = outstanding(view);
    out.stdout(`Run ${view.run.runId} (${view.run.runbookName}, journal ${view.file}): ${todo.length} fault(s) to revert`);
    if (!todo.length && !agentsLeft(view)) continue;
    let kube: KubeAccess;
    try {
      kube = shared ?? deps.createKube({ kubeconfig: o.kubeconfig ?? view.run.kubeconfig, context: o.context ?? view.run.context, log });
    } catch (e) {
      kube = offlineKube(o.context ?? view.run.context, messageOf(e));
      out.stderr(`warning: ${messageOf(e)}; reverting node faults without the cluster`);
    }
    const ctx = deps.makeCtx({
      runId: view.run.runId,
      clock: realClock,
      log,
      signal: new AbortController().signal,
      inventory: view.run.inventory,
      kube,
    });
    // what recover reverts goes to the cluster's copy too, so the next recover does not take the run again
    const journal =
      fromCluster && shared && copied.runs.has(view.run.runId)
        ? reopenClusterJournal(view.file, { kube: shared, runId: view.run.runId, configMap: fromCluster, key: copied.key, log })
        : undefined;
    const result = await recoverRun(view, {
      ctx,
      registry: defaultRegistry,
      emit: toSinks(render),
      force: o.force,
      journal,
    }).finally(() => kube === shared || kube.close?.());
    if (journal && !(await journal.synced()))
      out.stderr(
        `  the journal's copy in ConfigMap ${fromCluster!.namespace}/${fromCluster!.name} lacks what was reverted; ${view.file} has it`,
      );
    for (const err of result.errors) out.stderr(redactText(`  ${err}`));
    if (result.remaining.length) {
      code = EXIT.rollbackIncomplete;
      out.stderr(`  still applied: ${result.remaining.map((f) => `${f.action}${f.node ? ` on ${f.node}` : ''}`).join(', ')}`);
    } else out.stdout(`  all ${result.reverted.length} reverted`);
  }
  shared?.close?.();
  return code;
}

export interface RecoverFlags {
  all?: boolean;
  force?: boolean;
  fromCluster?: string;
  trustUnsignedJournal?: boolean;
  inCluster?: boolean;
  kubeconfig?: string;
  context?: string;
  stateDir?: string;
  verbose?: boolean;
}

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Run',
  examples: [
    ['recover', 'revert what the newest interrupted run left applied'],
    ['recover --all', 'every run with something still applied'],
    ['recover --from-cluster kube-runbook/journals', 'runs that ran in the cluster, from their journal ConfigMap'],
  ],
};
