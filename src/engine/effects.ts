import type { AppliedEffect, AppliedEffects } from '../contract/context.js';

/** The run's applied effects (Ctx.applied), by fault id: the ledger adds one when an apply succeeds, drops it on revert. */
export class RunEffects implements AppliedEffects {
  private readonly byFault = new Map<string, AppliedEffect>();
  private readonly listeners = new Set<() => void>();

  current(): readonly AppliedEffect[] {
    return [...this.byFault.values()];
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  set(faultId: string, effect: AppliedEffect | undefined): void {
    if (effect) this.byFault.set(faultId, effect);
    else if (!this.byFault.delete(faultId)) return;
    for (const fn of this.listeners) fn();
  }
}
