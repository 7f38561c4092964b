import type { NodeFactsOf } from '../contract/node-facts.js';
import type { NumbersOf } from '../contract/reading-numbers.js';
import type { Reading } from '../contract/probe.js';
import type { Attempt, RunStatus } from '../journal/outcomes.js';

/** The run's outcomes and its attempts are what its journal records too: they are the journal's words. */
export { RUN_STATUS, type Attempt, type RetriedOp, type RunStatus } from '../journal/outcomes.js';

export type StepKind = 'action' | 'expect' | 'wait' | 'confirm' | 'revert' | 'parallel';
export type StepStatus = 'passed' | 'failed' | 'aborted' | 'skipped';

/** A fault (or remediation) the run applied, as reports and `recover` name it. */
export interface FaultRef {
  faultId: string;
  action: string;
  node?: string;
  step: string;
  /** A remediation, or a protective step (revertLast): reverted last, after rollback.waitFor holds. */
  remediation: boolean;
  /** Shell text that removes it by hand, when the action can say. */
  manualRevert?: string;
}

/**
 * A recovery objective's clock: started (at `startedAt`), stopped because its probe held ok (`met`, after
 * `recoveryMs`), run out (`missed`), or never started or cut short (`unmeasured`: its step never ran, an interrupt).
 */
export interface ObjectiveEvent {
  type: 'objective';
  at: number;
  name: string;
  phase: 'start' | 'met' | 'missed' | 'unmeasured';
  detail: string;
  withinMs: number;
  startedAt?: number;
  recoveryMs?: number;
  /** Met or missed, when the objective's probe judges nodes one by one: each node's time to recover. */
  nodes?: ObjectiveNodes;
}

/** The nodes of an objective: each one not ok at its clock's start or after it, timed from the start to its recovery. */
export interface ObjectiveNodes {
  /** How many were not ok during the clock and are ok again. */
  recovered: number;
  /** Their times to recover (nearest rank), and the slowest node; absent when none was broken. */
  p50Ms?: number;
  maxMs?: number;
  slowest?: string;
  /** Those still not ok when the clock stopped: how many, and the first names. */
  notRecovered: number;
  notRecoveredNames: string[];
}

/** Everything a run reports, in order; renderers (live view, JSON, JUnit) only read these. */
export type RunEvent =
  | { type: 'run-start'; at: number; runId: string; runbook: string; context: string; dryRun: boolean; journal: string }
  | { type: 'preflight'; at: number; check: string; ok: boolean; detail: string }
  | { type: 'step-start'; at: number; index: string; name: string; kind: StepKind }
  | { type: 'step-end'; at: number; index: string; name: string; kind: StepKind; status: StepStatus; detail: string }
  | { type: 'fault-applied'; at: number; fault: FaultRef }
  | { type: 'fault-apply-failed'; at: number; fault: FaultRef; error: string }
  /** `attempts` made in all; `retried`: the kinds of the transient failures before the last attempt. */
  | { type: 'fault-reverted'; at: number; fault: FaultRef; attempts: number; retried: string[] }
  | { type: 'fault-revert-failed'; at: number; fault: FaultRef; error: string; attempts: number; retried: string[] }
  /** A failed attempt at something retried: of a fault's revert, disarm, arm; a keepalive or prepare on a node; a preflight check (`what`). */
  | ({ type: 'attempt'; at: number; fault?: FaultRef; node?: string; what?: string } & Attempt)
  /**
   * A reading of a guard's, an expect step's or an observer's probe, with the probe's declaration of the node facts
   * its readings hold (`meta.nodeFacts`) and of the numbers they carry (`meta.numbers`), for sinks to take them from
   * the redacted reading.
   */
  | {
      type: 'guard-reading';
      at: number;
      guard: string;
      reading: Reading;
      armed: boolean;
      nodeFacts?: NodeFactsOf<unknown>;
      numbers?: NumbersOf<unknown>;
    }
  | { type: 'step-reading'; at: number; index: string; reading: Reading; nodeFacts?: NodeFactsOf<unknown>; numbers?: NumbersOf<unknown> }
  | { type: 'guard-fired'; at: number; guard: string; response: 'abort' | 'remediate' | 'warn' | 'hold' | 'resume'; detail: string }
  | { type: 'observation'; at: number; name: string; reading: Reading; nodeFacts?: NodeFactsOf<unknown>; numbers?: NumbersOf<unknown> }
  | { type: 'remediation'; at: number; phase: 'start' | 'end'; detail: string }
  | { type: 'confirm'; at: number; message: string; answer: 'yes' | 'no' | 'timeout' }
  | { type: 'rollback-start'; at: number; reason: string; faults: FaultRef[] }
  | { type: 'rollback-wait'; at: number; phase: 'start' | 'ok' | 'timeout'; detail: string }
  | { type: 'rollback-end'; at: number; complete: boolean; remaining: FaultRef[] }
  | { type: 'log'; at: number; level: 'info' | 'warn' | 'error'; message: string }
  | ObjectiveEvent
  | { type: 'run-end'; at: number; status: RunStatus; reason: string; remaining: FaultRef[]; recoverCommand?: string };

export type RunEventSink = (event: RunEvent) => void;
