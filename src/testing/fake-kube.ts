import { KubeConfig } from '@kubernetes/client-node';
import type { AccessCheck, KubeAccess, NodeSummary, RawResponse } from '../kube/types.js';

/** A cluster that answers from memory: context name, nodes, RBAC answers. */
export function fakeKube(o: { context?: string; nodes?: NodeSummary[]; deny?: (c: AccessCheck) => boolean } = {}): KubeAccess {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'fake', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'fake' }],
    contexts: [{ name: o.context ?? 'lab', cluster: 'fake', user: 'fake' }],
    currentContext: o.context ?? 'lab',
  });
  return {
    contextName: o.context ?? 'lab',
    server: 'https://127.0.0.1:1',
    config,
    listNodes: async () => o.nodes ?? [],
    canI: async (c) => !(o.deny?.(c) ?? false),
    raw: async (): Promise<RawResponse> => ({ status: 200, body: 'ok' }),
  };
}
