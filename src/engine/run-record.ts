import { hostname } from 'node:os';
import type { Ctx } from '../contract/context.js';
import type { RunStatus } from './events.js';
import type { Journal } from '../journal/journal.js';
import type { Plan } from './plan.js';

/**
 * The run's record in the journal: what `recover` needs to reach the cluster and the nodes again, written once the
 * run can leave something behind (its lock taken, or its node agents starting), and the end. A refused run leaves
 * no journal.
 */
export class RunRecord {
  private written = false;

  constructor(private readonly o: { ctx: Ctx; plan: Plan; journal: Journal | null; inventoryFile: string; kubeconfig?: string }) {}

  /** Writes the run record, once. */
  begin(): void {
    if (this.written) return;
    this.written = true;
    const { ctx, plan } = this.o;
    this.o.journal?.append({
      type: 'run',
      at: ctx.clock.now(),
      runId: ctx.runId,
      runbookFile: plan.file,
      runbookName: plan.runbook.metadata.name,
      inventoryFile: this.o.inventoryFile,
      inventory: plan.inventory,
      kubeconfig: this.o.kubeconfig,
      context: ctx.kube.contextName,
      allowContexts: plan.safety.allowContexts,
      lockNamespace: plan.safety.lockNamespace,
      faultTtlMs: plan.safety.faultTtl,
      remediationTtlMs: plan.safety.remediationTtl,
      waitFor: plan.runbook.spec.rollback.waitFor && { ...plan.runbook.spec.rollback.waitFor, withinMs: plan.rollback.withinMs },
      pid: process.pid,
      host: hostname(),
    });
  }

  /** Writes the end, when the run was recorded. */
  end(status: RunStatus): void {
    if (this.written) this.o.journal?.append({ type: 'end', at: this.o.ctx.clock.now(), status });
  }
}
