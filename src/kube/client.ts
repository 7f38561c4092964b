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
  clock?: Clock;
  log?: Logger;
  watch?: Partial<WatchOptions>;
}

/** Loads the kubeconfig and builds the run's KubeAccess, with its one shared watch hub. */
export function createKubeAccess(options: KubeAccessOptions = {}): KubeAccess {
  const config = loadConfig(options.kubeconfig);
  if (options.context) {
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
    if (process.env.KUBERNETES_SERVICE_HOST && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')) {
      config.loadFromCluster();
      return config;
    }
  } catch (e) {
    if (e instanceof KrError) throw e;
    throw new KrError('KUBE_UNAVAILABLE', `cannot load the kubeconfig: ${messageOf(e)}`, { exit: 3, cause: e });
  }
  throw new KrError('KUBE_UNAVAILABLE', 'no kubeconfig: give --kubeconfig, set KUBECONFIG or create ~/.kube/config', { exit: 3 });
}
