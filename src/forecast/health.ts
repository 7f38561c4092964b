import { type LifecycleSettings, NEVER, type NodeRow, isControllerTaint, lastHeartbeatOf } from './model.js';
import type { SlimTaint } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';
import type { WorkingRow } from './store.js';

/*
 * Node health, as the controller's monitorNodeHealth and tryUpdateNodeHealth judge it: a node whose heartbeats stop
 * is marked Unknown once its grace period has passed since the controller last saw one, in a pass of the monitor
 * period, and is queued for the NoExecute taint in that pass (or the next, on 1.20).
 */

/** The taint the controller puts on a node it sees NotReady (Ready=False) or Unknown; shared, never changed. */
export const NOT_READY_TAINT: Readonly<SlimTaint> = Object.freeze({ key: NOT_READY, effect: 'NoExecute' });
export const UNREACHABLE_TAINT: Readonly<SlimTaint> = Object.freeze({ key: UNREACHABLE, effect: 'NoExecute' });

export interface HealthContext {
  now: number;
  settings: LifecycleSettings;
  silentAfter: number;
  /** One monitor period on 1.20, which queues a node the pass after it marks it Unknown; else 0. */
  queueDelay: number;
  /** When the current leader started (its grace periods count from its first pass); -Infinity: long ago. */
  leaderSince: number;
}

/**
 * The health of the row's node now, when the controller can mark it NotReady and queue it, and the NoExecute taint it
 * has or will get: the row's health and taints, rewritten.
 */
export function nodeHealth(row: WorkingRow, c: HealthContext): void {
  const { now, settings: s } = c;
  const node = row.node;
  const P = s.nodeMonitorPeriodMs;
  const status = node.ready?.status;
  const lastHeartbeat = lastHeartbeatOf(node, node.leaseRenew);
  const silent = lastHeartbeat === undefined || now - lastHeartbeat > c.silentAfter;
  const notReady = status !== 'True';
  const taintNow = node.taints.find(isControllerTaint);
  // a node that never posted status has the startup grace period, from its creation
  const grace = status !== undefined ? s.nodeMonitorGracePeriodMs : s.nodeStartupGracePeriodMs;
  // a new leader has seen no heartbeat before its start: it counts the grace period from then
  const seen = Math.max(lastHeartbeat ?? now, c.leaderSince);
  row.lastHeartbeat = lastHeartbeat ?? NaN;
  row.silent = silent;
  row.notReady = notReady;
  row.notReadyAt = seen + grace;
  row.downEarly = NEVER;
  row.downLate = NEVER;
  row.queuedFrom = NEVER;
  row.queuedBy = NEVER;
  if (notReady) {
    const transition = node.ready?.transition ?? now;
    row.notReadyAt = transition;
    // NotReady since its transition; with heartbeats back (Unknown but renewing) it may turn Ready any moment
    const staysDown = silent || status === 'False';
    row.downEarly = transition;
    row.downLate = staysDown ? transition : NEVER;
    // Ready=False is queued at once; Unknown in the same pass, or one later on 1.20; a new leader queues at its start
    row.queuedFrom = Math.max(transition + (status === 'False' ? 0 : c.queueDelay), c.leaderSince);
    // a pass later at most (a new leader's first pass); not at all if it turns Ready first
    if (staysDown) row.queuedBy = Math.max(row.queuedFrom, now) + s.nodeMonitorPeriodMs;
  } else if (silent) {
    row.downEarly = Math.max(seen + grace, now);
    // the pass after the grace ran out, the controller having seen the last heartbeat up to a pass late
    row.downLate = Math.max(seen + grace + 2 * P + 1000, now);
    row.queuedFrom = row.downEarly + c.queueDelay;
    row.queuedBy = row.downLate + c.queueDelay;
  }
  row.taintNow = taintNow;
  row.taintedAt = taintNow ? (node.taintedSince ?? taintNow.timeAdded ?? now) : NaN;
  row.taintComing = taintNow ?? (notReady || silent ? (status === 'False' ? NOT_READY_TAINT : UNREACHABLE_TAINT) : undefined);
}

/** Failing: silent, not Ready, or tainted. Only failing nodes' pods can be evicted. */
export const isFailingRow = (r: NodeRow): boolean => r.silent || r.notReady || r.taintNow !== undefined;
