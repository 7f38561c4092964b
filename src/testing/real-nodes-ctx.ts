import { realClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import type { Ctx } from '../contract/context.js';
import type { Inventory } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import { createNodeAccess } from '../nodes/access.js';

/**
 * A run's context that reaches the inventory's nodes for real (their transports) and `kube` (a fake), on the real
 * clock; built into dist/testing/ for the fixture that runs an engine in a process of its own.
 */
export function realNodesCtx(runId: string, inventory: Inventory, kube: KubeAccess): Ctx {
  return {
    runId,
    clock: realClock,
    log: silentLogger,
    signal: new AbortController().signal,
    dryRun: false,
    inventory,
    kube,
    nodes: createNodeAccess(inventory),
  };
}
