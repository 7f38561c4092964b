import type { RunEffects } from './effects.js';
import type { Action, RevertState } from '../contract/action.js';
import type { Backoff } from '../core/retry.js';
import type { InventoryNode } from '../inventory/schema.js';
import type { Ctx } from '../contract/context.js';
import type { FaultRef, RunEventSink } from './events.js';
import type { Journal } from '../journal/journal.js';

export interface AppliedFault {
  ref: FaultRef;
  action: Action;
  node?: InventoryNode;
  state: RevertState;
  deadman: boolean;
  reverted: boolean;
}

export interface FaultLedgerOptions {
  ctx: Ctx;
  journal: Journal | null;
  emit: RunEventSink;
  faultTtlMs: number;
  /** The dead-man's wait for remediations and protective steps (spec.safety.remediationTtl); faultTtlMs when absent. */
  remediationTtlMs?: number;
  /** By when the run ends at the latest (ActionCtx.runEndsBy); absent for recover, which applies nothing. */
  runEndsBy?: number;
  /** Who reverts, for the journal. */
  by?: 'executor' | 'recover';
  /** The back-off between attempts (tests pass a constant `random`). */
  backoff?: Partial<Backoff>;
  /** What the run holds applied that stops evictions (Ctx.applied), kept up to date with each apply and revert. */
  effects?: RunEffects;
  /** Called before anything of an apply happens (the run makes its lock outlast what it applies); a throw stops it. */
  beforeApply?: (action: Action, remediation: boolean) => Promise<void>;
}

/** Where an apply happens: its step, whether it is a remediation, and the step's signal and deadline (its timeout). */
export interface ApplyOn {
  step: string;
  remediation: boolean;
  signal: AbortSignal;
  deadline: number;
  /** Every node the step applies the action on (ActionCtx.selection). */
  selection?: readonly string[];
}

/** Whose attempts: a fault's, or, before there is one, a node's (prepare, keepalive) with what it was doing. */
export interface Who {
  fault?: AppliedFault;
  node?: string;
  what?: string;
}
