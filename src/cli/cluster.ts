import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import type { Clock } from '../core/clock.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { LoadedInventory } from '../inventory/load.js';
import type { Inventory } from '../inventory/schema.js';
import { createKubeAccess } from '../kube/client.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess, NodeSummary } from '../kube/types.js';
import { serverVersion, type KubeVersion } from '../kube/versions.js';

/** The cluster a command's flags name: `--inventory`, `--kubeconfig`, `--context`, `--in-cluster`, `--offline`. */
export interface ClusterOptions {
  inventory?: string;
  kubeconfig?: string;
  context?: string;
  /** The pod's ServiceAccount instead of any kubeconfig (the Job of `kube-runbook manifests`). */
  inCluster?: boolean;
  /** No cluster at all: no kubeconfig read, no connection tried (`plan --offline`). */
  offline?: boolean;
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
  // the first request a plan makes: the cluster's nodes, for label selectors
  let nodes: NodeSummary[];
  try {
    nodes = await kube.listNodes();
  } catch (e) {
    const why = e instanceof ApiStatusError ? `answered ${e.status} to listing nodes: ${messageOf(e)}` : `does not answer: ${messageOf(e)}`;
    const error = new KrError('KUBE_UNAVAILABLE', `the apiserver ${kube.server} of context ${quote(kube.contextName)} ${why}`, {
      exit: EXIT.refused,
      cause: e,
    });
    return { kube, error };
  }
  return { kube, nodes, version: await serverVersion(kube) };
}
