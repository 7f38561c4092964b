import { EXIT, type ExitCode, messageOf } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { describeHalt, haltFlag, HALT_NAME, HALT_NAMESPACE, type HaltState, readHalts } from '../kube/halt.js';
import { currentRunLockHolder, holderLive, RUN_LOCK_NAME, type RunLockHolder } from '../engine/run-lock-lease.js';
import type { KubeAccess } from '../kube/types.js';
import type { LocalRun } from '../engine/local-runs.js';
import { type HaltDeps, type HaltFlags, haltOptions, localRunsOf, realHaltDeps } from './halt.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

interface Status {
  namespace: string;
  halt?: HaltState;
  /** The cluster's halt (kube-system), which stops the runs locked in `namespace` too: read when `namespace` differs. */
  clusterHalt?: HaltState;
  lock?: RunLockHolder | null;
  error?: string;
  runs: LocalRun[];
  unreadable: string[];
}

const LOCAL: Record<LocalRun['state'], string> = {
  running: 'running',
  killed: 'killed (kube-runbook recover RUN undoes what it left)',
  ended: 'ended with something still applied (kube-runbook recover RUN)',
  elsewhere: 'started on another host',
};

/** `kube-runbook status`: the halt, the run lock's holder, and this machine's runs; exit 1 when the cluster cannot be read. */
export async function statusCommand(o: HaltFlags, deps: HaltDeps): Promise<ExitCode> {
  const s: Status = { namespace: o.namespace, ...localRunsOf(o, deps.processes) };
  let kube: KubeAccess | undefined;
  try {
    kube = deps.kube(o);
    const [cluster, own] = await readHalts(kube, o.namespace, { timeoutMs: 10_000 });
    s.halt = own ?? cluster;
    if (own) s.clusterHalt = cluster;
    s.lock = (await currentRunLockHolder(kube, { namespace: o.namespace, now: () => deps.clock.now() })) ?? null;
  } catch (e) {
    s.error = messageOf(e);
  } finally {
    kube?.close?.();
  }
  out.stdout(redactText(o.output === 'json' ? JSON.stringify(s, null, 2) : statusText(s, deps.clock.now())));
  return s.error ? EXIT.failed : EXIT.ok;
}

function statusText(s: Status, now: number): string {
  const lines: string[] = [];
  const h = s.halt;
  if (s.error) lines.push(`cluster: cannot read Lease ${s.namespace}/${HALT_NAME} or ${RUN_LOCK_NAME}: ${s.error}`);
  for (const x of s.clusterHalt ? [s.clusterHalt, h!] : h ? [h] : []) lines.push(haltText(x));
  if (s.lock) {
    const live =
      s.lock.state === 'left' ? 'left held by an ended run' : holderLive(s.lock, now) ? s.lock.state : `${s.lock.state}, holder silent`;
    lines.push(`run lock: run ${s.lock.runId} (${s.lock.where}), ${live}, since ${s.lock.since}, expires ${s.lock.expires}`);
  } else if (s.lock === null) lines.push(`run lock: free (Lease ${s.namespace}/${RUN_LOCK_NAME})`);
  if (!s.runs.length) lines.push('runs on this machine: none running, none left applied');
  else {
    lines.push('runs on this machine:');
    for (const r of s.runs)
      lines.push(
        `  ${r.runId}  ${LOCAL[r.state].replace('RUN', r.runId)}  pid ${r.pid}@${r.host}  ${r.runbook}  since ${r.since}  ${r.applied} applied`,
      );
  }
  for (const u of s.unreadable) lines.push(`  unreadable journal ${u}`);
  return lines.join('\n');
}

/** One halt's line: set (who, when, why, how to clear it), or not, and which runs it stops. */
function haltText(h: HaltState): string {
  if (h.halt) return `HALTED: ${describeHalt(h.namespace, h.halt)}; kube-runbook resume${haltFlag(h.namespace)} clears it`;
  const stops = h.namespace === HALT_NAMESPACE ? 'stops every run' : `stops the runs locked in ${h.namespace}`;
  const resumed = h.resumedBy ? `; last resumed by ${h.resumedBy} at ${h.resumedAt}` : '';
  return `halt: not set (Lease ${h.namespace}/${HALT_NAME}, \`kube-runbook halt${haltFlag(h.namespace)}\`: ${stops}${resumed})`;
}

export const register: Register = (program, done) => {
  haltOptions(
    program
      .command('status')
      .description("Show the halt, who holds the run lock, and this machine's runs (running, killed, left applied)."),
    false,
  ).action(async (o: HaltFlags) => done(await statusCommand(o, realHaltDeps())));
};

export const help: CommandHelp = {
  group: 'Run',
  examples: [
    ['status --context prod', "the halt, the run lock's holder, and this machine's runs"],
    ['status -o json', 'the same, as JSON'],
  ],
};
