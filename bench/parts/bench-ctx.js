// The Ctx a benchmark runs probes with, as the executor builds it for a run: the real clock, a silent log (or, with
// KUBE_RUNBOOK_BENCH_LOG=FILE, every line of the cluster access's log down to debug appended to FILE with its time:
// watches failing, restarting, relisting), the inventory's nodes and the cluster of the kubeconfig; `abort` stops the
// probes.
/* global AbortController */
import { realClock } from '../../dist/core/clock.js';
import { appendFileSync } from 'node:fs';
import { createLogger, silentLogger } from '../../dist/core/logger.js';
import { loadInventory } from '../../dist/inventory/load.js';
import { createKubeAccess } from '../../dist/kube/client.js';
import { createNodeAccess } from '../../dist/nodes/access.js';

export async function benchCtx({ inventoryFile, kubeconfig, context }) {
  const inv = await loadInventory(inventoryFile);
  const file = process.env.KUBE_RUNBOOK_BENCH_LOG;
  const log = file
    ? createLogger((level, msg) => appendFileSync(file, `${new Date().toISOString()} ${level} ${msg}\n`), 'debug')
    : silentLogger;
  const kube = createKubeAccess({ kubeconfig, context, clock: realClock, log });
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
