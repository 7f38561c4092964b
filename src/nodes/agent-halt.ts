import type { Clock } from '../core/clock.js';
import { formatDuration } from '../core/duration.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { AgentMemory } from './agent-memory.js';
import { type AgentApi, type LeaseLite, leasePath, statusOf } from './agent-protocol.js';
import { fireFaultsScript } from './keepalive.js';
import type { ExecResult } from './types.js';
import { wireScript } from './wire.js';

/** The halt (`kube-runbook halt`): a Lease of this name in the run lock's namespace, set while its holder is. */
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
 * Follows the halt beside the run Lease: once it is set (only its holder is read: who set it and why are logged) and
 * the executor has renewed nothing for `haltSilenceMs` (gone, or cut off from this node), fires the dead-men of the
 * run's faults on this node now, rather than faultTtl after the last renewal; remediations keep theirs. A halt seen
 * stays in force while the halt cannot be read (the apiserver struggling); one that cannot be read for lack of the
 * right is said once, the agent serving on (its dead-men then fire after faultTtl as before).
 */
export async function followHalt(
  o: { haltNamespace: string; runId: string; faultTtlMs: number; pollMs?: number; deadmanRoot?: string },
  d: { api: AgentApi; clock: Clock; log: Logger; signal: AbortSignal; run(wired: string, timeoutMs: number): Promise<ExecResult> },
  memory: AgentMemory,
): Promise<void> {
  const path = leasePath(o.haltNamespace, HALT_NAME);
  const silence = haltSilenceMs(o.faultTtlMs);
  let renewal = memory.renewal;
  let renewedAt = d.clock.now();
  let halt: string | undefined;
  let denied = false;
  while (!d.signal.aborted) {
    if (memory.renewal !== renewal) {
      renewal = memory.renewal;
      renewedAt = d.clock.now();
    }
    try {
      const by = (await d.api.json<LeaseLite>(path, { timeoutMs: 5_000, signal: d.signal })).spec?.holderIdentity || undefined;
      if (by && !halt)
        d.log.warn(`halted by ${by}: the faults' dead-men of this node fire if the executor renews nothing for ${formatDuration(silence)}`);
      halt = by;
    } catch (e) {
      if (statusOf(e) === 404) halt = undefined;
      else if (statusOf(e) === 403 && !denied) {
        denied = true;
        d.log.warn(
          `cannot read the halt (Lease ${o.haltNamespace}/${HALT_NAME}): ${messageOf(e)}; ` +
            'a halt reaches this node through its executor only (kube-runbook agent manifests grants the read)',
        );
      }
    }
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
