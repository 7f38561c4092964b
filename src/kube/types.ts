import type { RequestOptions } from './http.js';
import type { ClientConfig } from './kubeconfig.js';
import type { WatchHub } from './watch.js';

export interface NodeSummary {
  name: string;
  labels: Record<string, string>;
}

export interface AccessCheck {
  verb: string;
  /** A resource (with group, namespace), or a non-resource `path` such as /readyz. */
  resource?: string;
  path?: string;
  group?: string;
  namespace?: string;
  /** One object of the resource (an RBAC rule's resourceNames). */
  name?: string;
  subresource?: string;
}

export interface RawResponse {
  status: number;
  body: string;
}

/**
 * The cluster as modules see it, reached only through ctx.kube. The engine uses the narrow methods;
 * probes use `config` through the one shared watch helper in src/kube/.
 */
/** What createKubeAccess loads a cluster's access from: a kubeconfig file (or KUBECONFIG's) and a context, or the pod's own. */
export interface KubeSource {
  kubeconfig?: string;
  context?: string;
  inCluster?: boolean;
}

export interface KubeAccess {
  readonly contextName: string;
  readonly server: string;
  /** The kubeconfig's context in use: the server and the credentials to reach it with. */
  readonly config: ClientConfig;
  /** Where it was loaded from, for another process of this tool to load the same (set by createKubeAccess). */
  readonly source?: KubeSource;
  listNodes(labelSelector?: string): Promise<NodeSummary[]>;
  /** SelfSubjectAccessReview. */
  canI(check: AccessCheck): Promise<boolean>;
  /** GET of a raw path such as /readyz, with a timeout. */
  raw(path: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<RawResponse>;
  /**
   * The run's shared list+watch hub (src/kube/watch.ts): one watch per resource, whoever asks. Always set by
   * createKubeAccess; optional only so that small fakes which never watch need not build one.
   */
  readonly watches?: WatchHub;
  /** JSON of a 2xx answer to `path`; other statuses throw ApiStatusError (src/kube/source.ts). Set by createKubeAccess. */
  json?<T>(path: string, options?: RequestOptions): Promise<T>;
  /** A whole answer to `path` whatever its status (network failures and timeouts throw). Set by createKubeAccess. */
  request?(path: string, options?: RequestOptions): Promise<RawResponse>;
  /** Stops every watch and closes connections (end of the run). Set by createKubeAccess. */
  close?(): void;
}
