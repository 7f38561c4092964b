import type { Clock } from '../core/clock.js';
import { formatDuration } from '../core/duration.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { AgentMemory } from './agent-memory.js';
import { type AgentApi, type LeaseLite, leasePath, statusOf } from './agent-protocol.js';
import { fireFaultsScript } from './keepalive.js';
import type { ExecResult } from './types.js';
import { wireScript } from './wire.js';

/** The halt (`kube-runbook halt`): a Lease of this name, the cluster's in kube-system, set while its holder is. */
export const HALT_NAME = 'kube-runbook-halt';

/** How often the executor renews the run Lease for a faultTtl: a quarter of it, 1–30 s (as src/engine/run.ts). */
const renewEveryMs = (faultTtlMs: number) => Math.max(1000, Math.min(faultTtlMs / 4, 30_000));

/**
 * How long an agent waits, a halt being set, for a renewal of the run Lease before it fires its faults' dead-men:
 * two renewals missed and 5 s more. While its executor renews, the executor rolls back itself (its reverts come through
 * this agent, and a dead-man fired beside them would run a fault's revert twice at once).
 */
export const haltSilenceMs = (faultTtlMs: number) => 2 * renewEveryMs(faultTtlMs) + 5_000;

/**
 * Follows the halts that stop the run (the cluster's, in kube-system, and the run lock's namespace's) beside the run
 * Lease: once one is set (only its holder is read: who set it and why are logged) and the executor has renewed nothing
 * for `haltSilenceMs` (gone, or cut off from this node), fires the dead-men of the run's faults on this node now, rather
 * than faultTtl after the last renewal; remediations keep theirs. A halt seen stays in force while it cannot be read
 * (the apiserver struggling); one that cannot be read for lack of the right is said once, the agent serving on (its
 * dead-men then fire after faultTtl as before, or at the other halt).
 */
export async function followHalt(
  o: { haltNamespaces: string[]; runId: string; faultTtlMs: number; pollMs?: number; deadmanRoot?: string },
  d: { api: AgentApi; clock: Clock; log: Logger; signal: AbortSignal; run(wired: string, timeoutMs: number): Promise<ExecResult> },
  memory: AgentMemory,
): Promise<void> {
  const silence = haltSilenceMs(o.faultTtlMs);
  let renewal = memory.renewal;
  let renewedAt = d.clock.now();
  /** Each halt's holder as last read (absent: not set, or never read). */
  const holders = new Map<string, string>();
  const denied = new Set<string>();
  const read = async (ns: string) => {
    try {
      const lease = await d.api.json<LeaseLite>(leasePath(ns, HALT_NAME), { timeoutMs: 5_000, signal: d.signal });
      const by = lease.spec?.holderIdentity;
      if (by) holders.set(ns, by);
      else holders.delete(ns);
    } catch (e) {
      if (statusOf(e) === 404) holders.delete(ns);
      else if (statusOf(e) === 403 && !denied.has(ns)) {
        denied.add(ns);
        d.log.warn(
          `cannot read the halt (Lease ${ns}/${HALT_NAME}): ${messageOf(e)}; ` +
            'a halt there reaches this node through its executor only (kube-runbook agent manifests grants the read)',
        );
      }
    }
  };
  let halt: string | undefined;
  while (!d.signal.aborted) {
    if (memory.renewal !== renewal) {
      renewal = memory.renewal;
      renewedAt = d.clock.now();
    }
    await Promise.all(o.haltNamespaces.map(read));
    const set = o.haltNamespaces.find((ns) => holders.has(ns));
    const by = set && holders.get(set);
    if (by && !halt)
      d.log.warn(
        `halted by ${by} (Lease ${set}/${HALT_NAME}): the faults' dead-men of this node fire if the executor renews nothing for ${formatDuration(silence)}`,
      );
    halt = by;
    if (halt && d.clock.now() - renewedAt > silence) {
      const r = await d.run(wireScript(fireFaultsScript(o.runId, o.deadmanRoot)), 15_000);
      if (r.code === 0) {
        const fired = r.stdout.split('\n').filter(Boolean).length;
        d.log.warn(
          `halted by ${halt} and no renewal of the run Lease for ${formatDuration(d.clock.now() - renewedAt)}: fired ${fired} fault dead-man(s) now`,
        );
        return;
      }
      d.log.warn(`could not fire the dead-men at the halt: ${r.stderr.trim()}; trying again`);
    }
    await d.clock.sleep(o.pollMs ?? 1000, d.signal).catch(() => undefined);
  }
}
