// The Ctx a benchmark runs probes with, as the executor builds it for a run: the real clock, a silent log, the
// inventory's nodes and the cluster of the kubeconfig; `abort` stops the probes.
/* global AbortController */
import { realClock } from '../../dist/core/clock.js';
import { silentLogger } from '../../dist/core/logger.js';
import { loadInventory } from '../../dist/inventory/load.js';
import { createKubeAccess } from '../../dist/kube/client.js';
import { createNodeAccess } from '../../dist/nodes/access.js';

export async function benchCtx({ inventoryFile, kubeconfig, context }) {
  const inv = await loadInventory(inventoryFile);
  const kube = createKubeAccess({ kubeconfig, context, clock: realClock, log: silentLogger });
  const ac = new AbortController();
  const ctx = {
    runId: 'bench',
    clock: realClock,
    log: silentLogger,
    signal: ac.signal,
    dryRun: false,
    inventory: inv.inventory,
    kube,
    nodes: createNodeAccess(inv.inventory, { log: silentLogger, clock: realClock }),
  };
  return { ctx, kube, abort: () => ac.abort() };
}
