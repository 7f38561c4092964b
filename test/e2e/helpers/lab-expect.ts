import { CoreV1Api, type KubeConfig, type V1Node, VersionApi } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { labCli, leftovers } from './lab.js';

/** Options of `lab up` and the message that refuses them. */
type Refusal = readonly [args: string[], message: string];

/** `lab up --instance INSTANCE` with each refusal's options exits 2 saying its message, and leaves nothing behind. */
export async function expectUpRefused(instance: string, refusals: readonly Refusal[]): Promise<void> {
  for (const [args, message] of refusals) {
    const r = await labCli(['up', '--instance', instance, ...args]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(message);
  }
  expect(await leftovers(instance)).toEqual([]);
}

/** The cluster's nodes, once they are checked to be `names`, each Ready with a kubelet of the apiserver's release. */
export async function expectNodesReady(kc: KubeConfig, names: string[]): Promise<V1Node[]> {
  const server = await kc.makeApiClient(VersionApi).getCode();
  const nodes = (await kc.makeApiClient(CoreV1Api).listNode()).items;
  expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(names);
  for (const n of nodes) {
    expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(n.status?.nodeInfo?.kubeletVersion).toBe(server.gitVersion);
  }
  return nodes;
}
