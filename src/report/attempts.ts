import { formatDuration } from '../core/duration.js';
import type { Attempt, FaultRef, RetriedOp } from '../engine/events.js';

/** A failed attempt as run events and the report carry it. */
export interface AttemptOf extends Attempt {
  fault?: Pick<FaultRef, 'action' | 'node'>;
  node?: string;
  what?: string;
}

const VERB: Record<RetriedOp, string> = {
  revert: 'revert',
  disarm: 'disarm the dead-man of',
  arm: 'arm the dead-man of',
  prepare: 'prepare',
  keepalive: 'keep the dead-men alive',
  settle: 'reach the dead-man of',
  preflight: 'check',
  apply: 'apply',
  leave: 'keep the dead-man of',
  lock: 'renew the cluster-wide run lock',
  agents: 'renew the run Lease of the node agents',
};

const on = (node?: string) => (node ? ` on ${node}` : '');

/** "2 connection resets", "1 connection reset and 2 connection refusals". */
export function countKinds(kinds: string[]): string {
  const counts = new Map<string, number>();
  for (const k of kinds) counts.set(k, (counts.get(k) ?? 0) + 1);
  const parts = [...counts].map(([k, n]) => `${n} ${n === 1 ? k : `${k}s`}`);
  return parts.length <= 1 ? (parts[0] ?? '') : `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}`;
}

/** "on attempt 3 after 2 connection resets"; empty for something done at the first attempt. */
export function onAttempt(attempts: number | undefined, retried: string[] | undefined): string {
  if (attempts === undefined || attempts <= 1) return '';
  return retried?.length ? `on attempt ${attempts} after ${countKinds(retried)}` : `on attempt ${attempts}`;
}

/** "attempt 1 to revert block-kubelet-egress on node-1 failed (connection reset): …; retrying in 500ms" */
export function attemptLine(a: AttemptOf): string {
  const target = a.fault ? `${a.fault.action}${on(a.fault.node)}` : `${a.what ?? ''}${on(a.node)}`.trim();
  const kind = a.transient ?? 'permanent';
  const next = a.retryInMs !== undefined ? `; retrying in ${formatDuration(a.retryInMs)}` : a.transient ? '; no time left to retry' : '';
  return `attempt ${a.attempt} to ${VERB[a.op]}${target ? ` ${target}` : ''} failed (${kind}): ${a.error}${next}`;
}
