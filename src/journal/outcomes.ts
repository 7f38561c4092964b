/**
 * The words a run's journal shares with its events: how a run ends, and what it tried again. The journal records them
 * (src/journal/journal.ts) and the engine reports them (src/engine/events.ts).
 */

/** The closed set of outcomes of a run, and the exit code each leads to. */
export const RUN_STATUS = {
  passed: 0,
  failed: 1,
  aborted: 1,
  /** Stopped by `kube-runbook halt` while it ran, everything reverted. */
  halted: 1,
  refused: 3,
  'rollback-incomplete': 4,
  /** Every step passed and everything was reverted, but a recovery objective was missed. */
  'objective-missed': 5,
  interrupted: 130,
} as const;
export type RunStatus = keyof typeof RUN_STATUS;

/** What the engine tries again when it fails for a transient reason (src/engine/retry.ts). */
export type RetriedOp =
  'revert' | 'disarm' | 'keepalive' | 'arm' | 'prepare' | 'preflight' | 'settle' | 'apply' | 'leave' | 'lock' | 'agents';

/** One failed attempt: another follows after `retryInMs`, or, without it, the failure is final. */
export interface Attempt {
  op: RetriedOp;
  attempt: number;
  error: string;
  /** The failure's kind when it can pass ("connection reset"); absent when permanent. */
  transient?: string;
  retryInMs?: number;
}
