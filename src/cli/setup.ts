import { resolve } from 'node:path';
import type { Clock } from '../core/clock.js';
import { EXIT, KrError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Ctx } from '../contract/context.js';
import { requireNamedContext } from '../engine/contexts.js';
import type { Plan } from '../engine/plan.js';
import { defaultRegistry } from '../engine/registry.js';
import { buildPlan } from '../engine/static-checks.js';
import { loadInventory, type LoadedInventory } from '../inventory/load.js';
import { loadRunbook, type LoadedRunbook } from '../runbook/load.js';
import { type ClusterOptions, type Reached, reachCluster } from './cluster.js';
import { makeCtx, newRunId } from './ctx.js';

/** The inventory named by --inventory or $KUBE_RUNBOOK_INVENTORY. */
export async function inventoryFrom(o: ClusterOptions): Promise<LoadedInventory> {
  const file = o.inventory ?? process.env.KUBE_RUNBOOK_INVENTORY;
  if (!file)
    throw new KrError(
      'NO_INVENTORY',
      'no inventory: pass --inventory FILE or set KUBE_RUNBOOK_INVENTORY (the lab writes one: kube-runbook-lab env)',
      {
        exit: EXIT.invalid,
      },
    );
  return loadInventory(file);
}

/** The runbook and the inventory, both checked. */
export function loadInputs(runbookFile: string, o: ClusterOptions): Promise<[LoadedRunbook, LoadedInventory]> {
  return Promise.all([loadRunbook(runbookFile, defaultRegistry), inventoryFrom(o)]);
}

/** The plan of a loaded runbook on the cluster as reached (label selectors and `orElse` need it). Touches nothing. */
export function planOn(runbookFile: string, loaded: LoadedRunbook, inv: LoadedInventory, cluster: Reached): Promise<Plan> {
  return buildPlan(
    {
      runbook: loaded.runbook,
      file: runbookFile,
      inventory: inv.inventory,
      registry: defaultRegistry,
      clusterNodes: cluster.nodes,
      serverVersion: cluster.version,
    },
    { sources: { runbook: loaded, inventory: inv } },
  );
}

/** What a run is set up from besides its runbook: the cluster its flags name, and the run's clock and log. */
export interface RunSetupOptions {
  cluster: ClusterOptions;
  /** A dry run: its ctx reads only. */
  dryRun: boolean;
  clock: Clock;
  log: Logger;
}

/** A run set up: its plan and its ctx on the cluster. */
export interface RunSetup {
  plan: Plan;
  /** Absent when no client could be made: a run is refused, a dry run reports it in its preflight. */
  ctx?: Ctx;
  /** Why the cluster cannot be used: no client could be made, or it did not list its nodes. */
  kubeError?: KrError;
  /** The inventory file's absolute path, for the journal (`recover` reads it again). */
  inventoryFile: string;
}

/**
 * Everything a run needs, in one pass: the runbook and the inventory checked, the runbook's contexts against the
 * command line before the cluster is asked anything, the cluster reached, the plan on it, the run's ctx. Without a
 * cluster there is no ctx: `kubeError` says why.
 */
export async function setUpRun(runbookFile: string, o: RunSetupOptions): Promise<RunSetup> {
  const [loaded, inv] = await loadInputs(runbookFile, o.cluster);
  requireNamedContext(loaded, o.cluster.context !== undefined || o.cluster.inCluster === true);
  const cluster = await reachCluster(o.cluster, inv, o.clock, o.log);
  const plan = await planOn(runbookFile, loaded, inv, cluster);
  const runId = newRunId(plan.runbook.metadata.name, o.clock.now());
  const ctx =
    cluster.kube &&
    makeCtx({
      runId,
      clock: o.clock,
      log: o.log,
      signal: new AbortController().signal,
      inventory: inv.inventory,
      kube: cluster.kube,
      dryRun: o.dryRun,
    });
  return { plan, ctx, kubeError: cluster.error, inventoryFile: resolve(inv.file) };
}
