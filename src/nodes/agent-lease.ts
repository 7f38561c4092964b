import type { KeyObject } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { formatDuration } from '../core/duration.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { AgentMemory } from './agent-memory.js';
import { type AgentApi, type LeaseLite, leasePath, readRenewal, runLeaseName, statusOf } from './agent-protocol.js';
import { keepaliveScript } from './keepalive.js';
import type { ExecResult } from './types.js';
import { wireScript } from './wire.js';

/**
 * Touches the run's keepalives on this node each time the run's Lease shows a renewal it has not counted yet, signed
 * by the executor that started this agent and numbered higher than the last one it counted (remembered on the node):
 * the dead-men then fire `faultTtl` after the last renewal this node saw, whether the executor died or the node lost
 * the apiserver, whoever else writes the Lease (a renewal unsigned, changed, signed by another key or written back
 * from before is ignored, and said once). How long none came is measured on this node's clock. Returns true when a
 * read of the Lease shows none came for faultTtl (a node cut off from the apiserver reads nothing: once back, it
 * finds the renewals made meanwhile, and serves on).
 */
export async function followLease(
  o: {
    namespace: string;
    runId: string;
    executorKey: KeyObject;
    faultTtlMs: number;
    leasePollMs?: number;
    deadmanRoot?: string;
  },
  d: { api: AgentApi; clock: Clock; log: Logger; signal: AbortSignal; run(wired: string, timeoutMs: number): Promise<ExecResult> },
  memory: AgentMemory,
): Promise<boolean> {
  const path = leasePath(o.namespace, runLeaseName(o.runId));
  const touch = wireScript(keepaliveScript(o.runId, o.deadmanRoot));
  let lastSeenAt = d.clock.now();
  // a renewal counted whose keepalives are not touched yet (the touch failed: tried again at the next read)
  let untouched = false;
  // each kind of renewal ignored is said once, until the executor's next renewal counts: a writer that keeps
  // forging (every second, say) fills no log
  const said = new Set<string>();
  const ignore = (kind: string, why: string) => {
    if (said.has(kind)) return;
    said.add(kind);
    d.log.warn(`ignored run Lease renewal: ${why}`);
  };
  // A renewal counts once this agent has seen the Lease change. The one it finds when it starts may be long stale (its
  // executor killed, the agent started again since): touching the keepalives for it would put every dead-man of the
  // run back by faultTtl, and an agent that keeps restarting would keep the faults applied.
  let readOnce = false;
  while (!d.signal.aborted) {
    // whether the Lease was read (or found gone): only then can the agent tell a run gone from a node cut off
    let read: boolean;
    try {
      const lease = await d.api.json<LeaseLite>(path, { timeoutMs: 5_000, signal: d.signal });
      read = true;
      const r = readRenewal(lease, { runId: o.runId, namespace: o.namespace, executorKey: o.executorKey });
      if (r && 'ignored' in r) ignore(r.kind, r.ignored);
      else if (r && r.seq < memory.renewal)
        ignore('old', `renewal ${r.seq} is older than renewal ${memory.renewal}, counted already (an old renewal written back)`);
      else if (r && r.seq > memory.renewal) {
        // on the node before it counts: the same renewal written back after a restart is then an old one
        try {
          await memory.renewed(r.seq);
        } catch (e) {
          d.log.warn(`renewal ${r.seq} of the run Lease not counted yet: this agent cannot remember it (${messageOf(e)})`);
          throw e;
        }
        if (readOnce) {
          lastSeenAt = d.clock.now();
          untouched = true;
          said.clear();
        }
      }
      if (untouched) {
        const t = await d.run(touch, 15_000);
        if (t.code === 0) untouched = false;
        else d.log.warn(`keepalive failed: ${t.stderr.trim()}`);
      }
    } catch (e) {
      read = statusOf(e) === 404;
      if (!d.signal.aborted && !read) d.log.debug(`run Lease: ${messageOf(e)}`);
    }
    if (read) readOnce = true;
    if (read && d.clock.now() - lastSeenAt > o.faultTtlMs) {
      d.log.warn(
        `the run Lease has not been renewed for ${formatDuration(d.clock.now() - lastSeenAt)} (faultTtl ${formatDuration(o.faultTtlMs)}): the run is gone; ending`,
      );
      return true;
    }
    await d.clock.sleep(o.leasePollMs ?? 1000, d.signal).catch(() => undefined);
  }
  return false;
}
