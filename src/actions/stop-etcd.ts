import { z } from 'zod';
import type { ActionCtx } from '../contract/context.js';
import { defineAction } from '../contract/action.js';
import { KrError, quote } from '../core/errors.js';
import { etcdMembers, quorumOf } from '../kube/etcd-metrics.js';
import { describeTarget, runOnNode, serviceManager, serviceTarget, targetNode } from '../nodes/services/index.js';
import { STATUS_STOPPED } from '../nodes/services/types.js';
import { serviceStopAction, StopParams, type StopState } from './parts/stop-service.js';

const Params = StopParams.extend({
  allowQuorumLoss: z.boolean().default(false).meta({
    description: 'let the selection (or members already down) leave etcd without a quorum: no writes, the apiservers fail; off by default',
  }),
});
type Params = z.output<typeof Params>;

const base = serviceStopAction({
  id: 'stop-etcd',
  service: 'etcd',
  kind: 'fault',
  summary: 'Stop one etcd member on each selected node, refusing a selection that leaves no quorum; the revert starts it again.',
  description:
    'Stops the etcd member on each selected node (etcd nodes by default; select one, e.g. `{role: etcd, count: 1}`) and waits ' +
    'until its process is gone. A cluster of N members keeps working while a quorum (N/2+1, rounded down N/2 plus one) ' +
    'answers: preflight refuses a selection that would leave fewer members than that, counting the etcd nodes of the ' +
    'inventory, and before each stop the other members are asked whether they run, so members already down (an earlier ' +
    'step, a real failure) count too. `allowQuorumLoss: true` lets a game day take the quorum away on purpose. The revert ' +
    'starts the member again and waits until it is healthy (it rejoins its cluster with its data directory).',
  defaultNodes: { role: 'etcd' },
  layouts: {
    kubeadm:
      'moves `/etc/kubernetes/manifests/etcd.yaml` (the static pod of a stacked etcd) to `/etc/kubernetes/kube-runbook-parked/` and waits until the container (crictl) or process (pgrep) is gone; external etcd clusters are not covered. Without a quorum the revert can take minutes: the kubelet calls the apiserver about the mirror pod of etcd (its housekeeping deletes it while the manifest is parked, the sync of the pod makes it again) before it starts the container, and an apiserver without etcd answers each call only when it times out (34 s on the lab); on a one-member kubeadm cluster of the lab etcd was healthy 2 min 15 s after the stop, its manifest back after 5 s, once the first wait of the revert for health (`timeout`) had run out and its retry moved the manifest out and back',
    k3s: {
      refused:
        'k3s embeds etcd in the `k3s` server process, so no member can stop alone; `stop-apiserver` stops the whole k3s server, its etcd member with it',
    },
    lab: "runs the lab's `stop` script of `etcd` on the member (cp-1..3 of `lab up --control-planes 3`) and waits until `status` says stopped",
  },
});

/** Stops etcd members; like `stop-apiserver` and the others, with a quorum check before anything is stopped. */
export default defineAction<typeof Params, StopState>({
  meta: { ...base.meta, params: Params },

  async preflight(ctx, params: Params) {
    const node = targetNode(ctx, 'stop-etcd');
    if (ctx.inventory.spec.layout === 'k3s')
      throw new KrError(
        'ETCD_EMBEDDED',
        `stop-etcd: k3s embeds etcd in the k3s server process on ${quote(node.name)}; no member stops alone (stop-apiserver stops the whole k3s server, its etcd member with it)`,
      );
    const members = etcdMembers(ctx.inventory.spec.nodes);
    if (!members.some((m) => m.name === node.name))
      throw new KrError(
        'NOT_AN_ETCD_MEMBER',
        `stop-etcd: ${quote(node.name)} is not an etcd member in the inventory (members: ${members.map((m) => m.name).join(', ') || 'none'})`,
      );
    const selected = members.filter((m) => (ctx.selection ?? [node.name]).includes(m.name));
    const left = members.length - selected.length;
    if (left < quorumOf(members.length) && !params.allowQuorumLoss)
      throw new KrError(
        'ETCD_QUORUM_LOSS',
        `stop-etcd: stopping ${selected.map((m) => m.name).join(', ')} leaves ${left} of ${members.length} etcd member(s), below the quorum of ${quorumOf(members.length)}; ` +
          'etcd would refuse every write and the apiservers fail. Select fewer members, or set allowQuorumLoss: true to do it on purpose',
      );
    await base.preflight!(ctx, params);
  },

  async prepare(ctx, params: Params) {
    const state = await base.prepare(ctx, params);
    if (!params.allowQuorumLoss && state.wasRunning) await checkOthersRunning(ctx, state);
    return state;
  },

  apply: (ctx, state) => base.apply(ctx, state),
  revert: (ctx, state) => base.revert(ctx, state),
  nodeSideRevert: (state) => base.nodeSideRevert(state),
  describe: (params) => `${base.describe!(params)}${params.allowQuorumLoss ? ', quorum loss allowed' : ', keeping a quorum'}`,
});

/** Asks every other member whether it runs: stopping this one must leave a quorum running. */
async function checkOthersRunning(ctx: ActionCtx, state: StopState): Promise<void> {
  const members = etcdMembers(ctx.inventory.spec.nodes);
  const others = members.filter((m) => m.name !== state.node);
  const down: string[] = [];
  for (const m of others) {
    const target = serviceTarget(ctx.inventory, m, 'etcd');
    const r = await runOnNode(ctx, m.name, serviceManager(target).status(target), {
      code: 'SERVICE_STATUS_FAILED',
      message: `stop-etcd: cannot tell whether ${describeTarget(target)} runs`,
      timeoutMs: 30_000,
      okCodes: [STATUS_STOPPED],
    });
    if (r.code === STATUS_STOPPED) down.push(m.name);
  }
  const left = others.length - down.length;
  if (left < quorumOf(members.length))
    throw new KrError(
      'ETCD_QUORUM_LOSS',
      `stop-etcd: ${down.join(', ')} already stopped; stopping ${state.node} too leaves ${left} of ${members.length} etcd member(s), below the quorum of ${quorumOf(members.length)} (allowQuorumLoss: true to do it on purpose)`,
    );
}
