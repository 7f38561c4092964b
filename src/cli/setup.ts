import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import type { Clock } from '../core/clock.js';
import type { Ctx } from '../contract/context.js';
import type { Logger } from '../core/logger.js';
import type { Plan } from '../engine/plan.js';
import { allowsEveryContext } from '../engine/contexts.js';
import { buildPlan } from '../engine/static-checks.js';
import { defaultRegistry } from '../engine/registry.js';
import { loadInventory, type LoadedInventory } from '../inventory/load.js';
import type { Inventory } from '../inventory/schema.js';
import { createKubeAccess } from '../kube/client.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess, NodeSummary } from '../kube/types.js';
import { createNodeAccess } from '../nodes/access.js';
import { newAgentKeys } from '../nodes/agent-auth.js';
import { loadRunbook, type LoadedRunbook } from '../runbook/load.js';
import { serverVersion, type KubeVersion } from '../kube/versions.js';

export interface ClusterOptions {
  inventory?: string;
  kubeconfig?: string;
  context?: string;
  /** The pod's ServiceAccount instead of any kubeconfig (the Job of `kube-runbook manifests`). */
  inCluster?: boolean;
  /** No cluster at all: no kubeconfig read, no connection tried (`plan --offline`). */
  offline?: boolean;
}

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

/** The kubeconfig a command reads and where that choice came from (for messages). */
interface KubeconfigChoice {
  /** A file; absent: $KUBECONFIG's files (merged) or ~/.kube/config, read by src/kube/kubeconfig.ts. */
  file?: string;
  /** `--kubeconfig`, `$KUBECONFIG`, `the inventory's spec.kubeconfig at FILE:LINE:COL`, `~/.kube/config`. */
  origin: string;
}

type Inv = { inventory: Inventory; dir: string; where?: LoadedInventory['where'] };

/**
 * The kubeconfig as kubectl finds it, with the inventory's between the two: --kubeconfig, else every file of
 * $KUBECONFIG, else the inventory's spec.kubeconfig (relative to the inventory file), else ~/.kube/config.
 * $KUBECONFIG comes before the inventory's so that a shell set up for one cluster (`kube-runbook lab env`, a CI job)
 * is never silently pointed at another by a file. A file named that does not exist: KUBECONFIG_MISSING, exit 2.
 */
function kubeconfigChoice(o: ClusterOptions, inv?: Inv, env: NodeJS.ProcessEnv = process.env): KubeconfigChoice | undefined {
  if (o.inCluster) return undefined;
  if (o.kubeconfig) return { file: resolve(expandHome(o.kubeconfig)), origin: '--kubeconfig' };
  const k = inv?.inventory.spec.kubeconfig;
  const at = inv?.where ? ` at ${inv.where(['spec', 'kubeconfig'])}` : '';
  if ((env.KUBECONFIG ?? '').split(':').some(Boolean))
    return { origin: k ? `$KUBECONFIG, which comes before the inventory's spec.kubeconfig${at}` : '$KUBECONFIG' };
  if (!k) return { origin: '~/.kube/config' };
  const path = expandHome(k);
  const file = isAbsolute(path) ? path : resolve(inv.dir, path);
  const origin = `the inventory's spec.kubeconfig${at}`;
  if (!existsSync(file))
    throw new KrError('KUBECONFIG_MISSING', `${origin} names the kubeconfig ${quote(file, Infinity)}, which does not exist`, {
      exit: EXIT.invalid,
      details: ["the kubeconfig is the first of: --kubeconfig, $KUBECONFIG, the inventory's spec.kubeconfig, ~/.kube/config"],
    });
  return { file, origin };
}

const expandHome = (p: string) => (p === '~' || p.startsWith('~/') ? join(homedir(), p.slice(1)) : p);

export function connect(o: ClusterOptions, inv: Inv | undefined, clock: Clock, log: Logger): KubeAccess {
  const choice = kubeconfigChoice(o, inv);
  return createKubeAccess({
    kubeconfig: choice?.file,
    kubeconfigOrigin: choice?.origin,
    // the inventory's context goes with the inventory's kubeconfig, not with one given by --kubeconfig
    context: o.context ?? (o.kubeconfig ? undefined : inv?.inventory.spec.context),
    inCluster: o.inCluster,
    clock,
    log,
  });
}

/** The cluster's nodes for label selectors, or why they could not be listed (it is the first request a plan makes). */
async function clusterNodes(kube: KubeAccess): Promise<NodeSummary[] | KrError> {
  try {
    return await kube.listNodes();
  } catch (e) {
    const why = e instanceof ApiStatusError ? `answered ${e.status} to listing nodes: ${messageOf(e)}` : `does not answer: ${messageOf(e)}`;
    return new KrError('KUBE_UNAVAILABLE', `the apiserver ${kube.server} of context ${quote(kube.contextName)} ${why}`, {
      exit: EXIT.refused,
      cause: e,
    });
  }
}

export function newRunId(name: string, now: number): string {
  const t = new Date(now)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${t}-${name.slice(0, 40)}-${randomBytes(2).toString('hex')}`;
}

/** The cluster as a plan sees it: absent when offline; `error` says why it could not be used. */
export interface Reached {
  /** Absent when offline or when no client could be made (no kubeconfig). */
  kube?: KubeAccess;
  /** Why the cluster could not be used: no client could be made (kube is absent), or it did not list its nodes. */
  error?: KrError;
  nodes?: NodeSummary[];
  version?: KubeVersion;
}

/** Connects and lists the nodes (the first request), unless offline. A bad --context still throws (exit 2). */
export async function reachCluster(o: ClusterOptions, inv: LoadedInventory, clock: Clock, log: Logger): Promise<Reached> {
  if (o.offline) return {};
  let kube: KubeAccess;
  try {
    kube = connect(o, inv, clock, log);
  } catch (e) {
    if (!(e instanceof KrError) || e.exit === EXIT.invalid) throw e;
    return { error: e };
  }
  const nodes = await clusterNodes(kube);
  if (nodes instanceof KrError) return { kube, error: nodes };
  return { kube, nodes, version: await serverVersion(kube) };
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

/** A run set up: its plan, and its ctx on the cluster (absent only in a dry run, when `kubeError` says why). */
export interface RunSetup {
  plan: Plan;
  ctx?: Ctx;
  kubeError?: KrError;
  /** The inventory file, whole, for the journal (`recover` reads it again). */
  inventoryFile: string;
}

/**
 * A runbook that allows every context runs only against a context named on the command line (`--context`, or
 * `--in-cluster`), never against whatever the kubeconfig's current context happens to be.
 */
function requireNamedContext(loaded: LoadedRunbook, o: ClusterOptions): void {
  if (o.context !== undefined || o.inCluster) return;
  const i = loaded.runbook.spec.safety.allowContexts.findIndex((p) => allowsEveryContext(p));
  if (i < 0) return;
  const pattern = loaded.runbook.spec.safety.allowContexts[i]!;
  throw new KrError(
    'CONTEXT_NOT_NAMED',
    `${loaded.where(['spec', 'safety', 'allowContexts', i])}: spec.safety.allowContexts[${i}]: ${quote(pattern)} allows every context: ` +
      `name the one to run against with --context NAME (the kubeconfig's current context is not taken for it)`,
    { exit: EXIT.invalid },
  );
}

/**
 * Everything a run needs, in one pass: the runbook and the inventory checked, the runbook's contexts against the
 * command line before the cluster is asked anything, the cluster reached, the run's ctx on it, the plan. Without a
 * cluster there is no ctx: `kubeError` says why.
 */
export async function setUpRun(runbookFile: string, o: RunSetupOptions): Promise<RunSetup> {
  const [loaded, inv] = await loadInputs(runbookFile, o.cluster);
  requireNamedContext(loaded, o.cluster);
  const cluster = await reachCluster(o.cluster, inv, o.clock, o.log);
  const ctx =
    cluster.kube &&
    makeCtx({
      runId: newRunId(loaded.runbook.metadata.name, o.clock.now()),
      clock: o.clock,
      log: o.log,
      signal: new AbortController().signal,
      inventory: inv.inventory,
      kube: cluster.kube,
      dryRun: o.dryRun,
    });
  const plan = await planOn(runbookFile, loaded, inv, cluster);
  return { plan, ctx, kubeError: cluster.error, inventoryFile: resolve(inv.file) };
}

export function makeCtx(o: {
  runId: string;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
  inventory: Inventory;
  kube: KubeAccess;
  dryRun?: boolean;
}): Ctx {
  // drawn per process: what `recover` starts signs with keys of its own, and its agents are pods of their own
  const agentKeys = newAgentKeys();
  return {
    runId: o.runId,
    clock: o.clock,
    log: o.log,
    signal: o.signal,
    dryRun: o.dryRun ?? false,
    inventory: o.inventory,
    kube: o.kube,
    agentKeys,
    nodes: createNodeAccess(o.inventory, {
      log: o.log,
      clock: o.clock,
      runId: o.runId,
      keys: agentKeys,
      // read when a script goes to an agent, not before: a plan without a cluster never gets there
      api: {
        json: (path, options) => {
          if (!o.kube.json)
            throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach the node agents', { exit: EXIT.refused });
          return o.kube.json(path, options);
        },
      },
    }),
  };
}
