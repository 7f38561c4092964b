import type { KubeConfig } from '@kubernetes/client-node';

export interface NodeSummary {
  name: string;
  labels: Record<string, string>;
}

export interface AccessCheck {
  verb: string;
  resource: string;
  group?: string;
  namespace?: string;
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
export interface KubeAccess {
  readonly contextName: string;
  readonly server: string;
  /** The client configuration (for the shared watch helper and typed API clients). */
  readonly config: KubeConfig;
  listNodes(labelSelector?: string): Promise<NodeSummary[]>;
  /** SelfSubjectAccessReview. */
  canI(check: AccessCheck): Promise<boolean>;
  /** GET of a raw path such as /readyz, with a timeout. */
  raw(path: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<RawResponse>;
}
