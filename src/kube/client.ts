import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { type Clock, realClock } from '../core/clock.js';
import { type Logger, silentLogger } from '../core/logger.js';
import { KrError, messageOf, quote } from '../core/errors.js';
import { httpSource } from './http-source.js';
import { KubeHttp } from './http.js';
import type { AccessCheck, KubeAccess, NodeSummary, RawResponse } from './types.js';
import { WatchHub } from './watch.js';
import type { WatchOptions } from './watch-types.js';

export interface KubeAccessOptions {
  /** A kubeconfig file; KUBECONFIG, ~/.kube/config or the in-cluster service account when absent. */
  kubeconfig?: string;
  context?: string;
  /** The pod's ServiceAccount (token and CA under /var/run/secrets/kubernetes.io/serviceaccount), whatever kubeconfig exists. */
  inCluster?: boolean;
  clock?: Clock;
  log?: Logger;
  watch?: Partial<WatchOptions>;
}

/** Loads the kubeconfig and builds the run's KubeAccess, with its one shared watch hub. */
export function createKubeAccess(options: KubeAccessOptions = {}): KubeAccess {
  const config = options.inCluster ? inClusterConfig() : loadConfig(options.kubeconfig);
  if (options.context && !options.inCluster) {
    const known = config.getContexts().map((c) => c.name);
    if (!known.includes(options.context))
      throw new KrError('KUBE_CONTEXT_UNKNOWN', `no context ${quote(options.context)} in the kubeconfig (known: ${known.join(', ') || 'none'})`, {
        exit: 2,
      });
    config.setCurrentContext(options.context);
  }
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new KrError('KUBE_UNAVAILABLE', `the kubeconfig's context ${quote(config.getCurrentContext())} names no cluster`, { exit: 3 });
  const clock = options.clock ?? realClock;
  const http = new KubeHttp(config, clock);
  const watches = new WatchHub(httpSource(http), clock, options.log ?? silentLogger, options.watch);
  return kubeAccessOver(config, http, watches);
}

/** A KubeAccess over an HTTP client and a hub (tests give a hub fed by a fake source). */
function kubeAccessOver(config: KubeConfig, http: KubeHttp, watches: WatchHub): KubeAccess {
  return {
    contextName: config.getCurrentContext(),
    server: config.getCurrentCluster()?.server ?? '',
    config,
    watches,
    json: (path, o) => http.json(path, o),
    async listNodes(labelSelector?: string): Promise<NodeSummary[]> {
      const list = await http.json<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>('/api/v1/nodes', {
        query: { labelSelector },
        timeoutMs: 30_000,
      });
      return list.items.map((n) => ({ name: n.metadata.name, labels: n.metadata.labels ?? {} })).sort((a, b) => a.name.localeCompare(b.name));
    },
    async canI(check: AccessCheck): Promise<boolean> {
      const review = await http.json<{ status?: { allowed?: boolean } }>('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        method: 'POST',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: check.path ? { nonResourceAttributes: { path: check.path, verb: check.verb } } : { resourceAttributes: check },
        },
        timeoutMs: 10_000,
      });
      return review.status?.allowed === true;
    },
    async raw(path: string, o: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<RawResponse> {
      return http.request(path, { timeoutMs: o.timeoutMs ?? 10_000, signal: o.signal });
    },
    close() {
      watches.close();
      http.close();
    },
  };
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The context name of the pod's own ServiceAccount config, as `spec.safety.allowContexts` matches it. */
const IN_CLUSTER_CONTEXT = 'in-cluster';

/**
 * The pod's ServiceAccount: client-node's loadFromCluster (the token file is read again as the kubelet rotates it),
 * under the context name `in-cluster` (client-node calls it inClusterContext).
 */
function inClusterConfig(): KubeConfig {
  if (!process.env.KUBERNETES_SERVICE_HOST || !process.env.KUBERNETES_SERVICE_PORT)
    throw new KrError('KUBE_UNAVAILABLE', 'not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set', { exit: 3 });
  for (const f of ['token', 'ca.crt'])
    if (!existsSync(`${SERVICE_ACCOUNT}/${f}`))
      throw new KrError('KUBE_UNAVAILABLE', `no ServiceAccount ${f} at ${SERVICE_ACCOUNT}/${f} (automountServiceAccountToken off?)`, { exit: 3 });
  const loaded = new KubeConfig();
  loaded.loadFromCluster();
  const [cluster] = loaded.getClusters();
  const [user] = loaded.getUsers();
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [cluster],
    users: [user],
    contexts: [{ name: IN_CLUSTER_CONTEXT, cluster: cluster!.name, user: user!.name }],
    currentContext: IN_CLUSTER_CONTEXT,
  });
  return config;
}

function loadConfig(file?: string): KubeConfig {
  const config = new KubeConfig();
  try {
    if (file) {
      if (!existsSync(file)) throw new KrError('KUBE_UNAVAILABLE', `kubeconfig ${quote(file)} does not exist`, { exit: 3 });
      config.loadFromFile(file);
      return config;
    }
    const env = (process.env.KUBECONFIG ?? '').split(':').filter(Boolean);
    if (env.length) {
      const missing = env.filter((f) => !existsSync(f));
      if (missing.length === env.length)
        throw new KrError('KUBE_UNAVAILABLE', `KUBECONFIG names no file that exists (got ${quote(process.env.KUBECONFIG)})`, { exit: 3 });
      config.loadFromDefault();
      return config;
    }
    if (existsSync(join(homedir(), '.kube', 'config'))) {
      config.loadFromDefault();
      return config;
    }
    if (process.env.KUBERNETES_SERVICE_HOST && existsSync(`${SERVICE_ACCOUNT}/token`)) return inClusterConfig();
  } catch (e) {
    if (e instanceof KrError) throw e;
    throw new KrError('KUBE_UNAVAILABLE', `cannot load the kubeconfig: ${messageOf(e)}`, { exit: 3, cause: e });
  }
  throw new KrError('KUBE_UNAVAILABLE', 'no kubeconfig: give --kubeconfig, set KUBECONFIG or create ~/.kube/config', { exit: 3 });
}
