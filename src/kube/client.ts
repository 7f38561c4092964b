import { type Clock, realClock } from '../core/clock.js';
import { type Logger, silentLogger } from '../core/logger.js';
import { httpSource } from './http-source.js';
import { KubeHttp } from './http.js';
import { loadClientConfig } from './kubeconfig.js';
import type { AccessCheck, KubeAccess, NodeSummary, RawResponse } from './types.js';
import { WatchHub } from './watch.js';
import type { WatchOptions } from './watch-types.js';

export interface KubeAccessOptions {
  /** A kubeconfig file; KUBECONFIG, ~/.kube/config or the in-cluster service account when absent. */
  kubeconfig?: string;
  /** Where the kubeconfig came from, for messages (see LoadOptions.origin). */
  kubeconfigOrigin?: string;
  context?: string;
  /** The pod's ServiceAccount (token and CA under /var/run/secrets/kubernetes.io/serviceaccount), whatever kubeconfig exists. */
  inCluster?: boolean;
  clock?: Clock;
  log?: Logger;
  watch?: Partial<WatchOptions>;
}

/** Loads the kubeconfig and builds the run's KubeAccess, with its one shared watch hub. */
export function createKubeAccess(options: KubeAccessOptions = {}): KubeAccess {
  const clock = options.clock ?? realClock;
  const config = loadClientConfig({
    file: options.kubeconfig,
    origin: options.kubeconfigOrigin,
    context: options.context,
    inCluster: options.inCluster,
    clock,
  });
  const http = new KubeHttp(config, clock);
  const watches = new WatchHub(httpSource(http), clock, options.log ?? silentLogger, options.watch);
  // the context resolved: another process loads the same one even if the kubeconfig's current context changes
  const source = options.inCluster
    ? { inCluster: true }
    : { ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}), context: config.contextName };
  return {
    contextName: config.contextName,
    server: config.server,
    config,
    source,
    watches,
    json: (path, o) => http.json(path, o),
    request: (path, o) => http.request(path, o),
    async listNodes(labelSelector?: string): Promise<NodeSummary[]> {
      const list = await http.json<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>('/api/v1/nodes', {
        query: { labelSelector },
        timeoutMs: 30_000,
      });
      return list.items
        .map((n) => ({ name: n.metadata.name, labels: n.metadata.labels ?? {} }))
        .sort((a, b) => a.name.localeCompare(b.name));
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
