import { realClock } from '../../../src/core/clock.js';
import type { Ctx } from '../../../src/contract/context.js';
import { memoryLogger } from '../../../src/core/logger.js';
import { loadInventory } from '../../../src/inventory/load.js';
import { createKubeAccess } from '../../../src/kube/client.js';
import type { LabInfo } from '../../../packages/lab/src/index.js';
import { createNodeAccess } from '../../../src/nodes/access.js';

/** A context for running probes and actions against a lab outside a run, as a run gives them one. */
export interface LabContext {
  ctx: Ctx;
  /** Stops what runs on the context (its signal), waits for `drained` (the probes' loops ending), closes its client. */
  close(drained?: () => Promise<unknown>): Promise<void>;
}

export async function labContext(
  lab: Pick<LabInfo, 'inventoryFile' | 'kubeconfig' | 'context'>,
  o: { runId?: string } = {},
): Promise<LabContext> {
  const { inventory } = await loadInventory(lab.inventoryFile);
  const log = memoryLogger();
  const kube = createKubeAccess({ kubeconfig: lab.kubeconfig, context: lab.context, clock: realClock, log });
  const ac = new AbortController();
  const ctx: Ctx = {
    runId: o.runId ?? 'e2e',
    clock: realClock,
    log,
    signal: ac.signal,
    dryRun: false,
    inventory,
    kube,
    nodes: createNodeAccess(inventory, { log, clock: realClock }),
  };
  return {
    ctx,
    async close(drained) {
      ac.abort();
      await drained?.();
      kube.close?.();
    },
  };
}
