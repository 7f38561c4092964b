import { GET_VERSION, READ_NODE_LEASES, READ_NODES } from '../contract/access.js';
import { z } from 'zod';
import { defineAction } from '../contract/action.js';
import { formatDuration } from '../core/duration.js';
import { KrError } from '../core/errors.js';
import { duration } from '../core/zod-helpers.js';
import type { Inventory, InventoryNode } from '../inventory/schema.js';
import { serverVersion, traitsOf } from '../kube/versions.js';
import { runOnNode, serviceTarget, targetNode } from '../nodes/services/index.js';
import { execTimeoutMs, seconds } from '../nodes/services/script.js';
import {
  applyScript,
  DEVICE_FLAG,
  exclusionsOf,
  FLAG,
  k3sControllers,
  k3sTarget,
  kubeadmTarget,
  NODE_SIDE_WAIT_S,
  nodeSideRevertScript,
  preflightScript,
  revertScript,
  stateScript,
  type TaintEvictionTarget,
} from './parts/taint-eviction.js';
import { waitForLifecycleTaintsGone } from './parts/stale-taints.js';

const Params = z.strictObject({
  timeout: duration().prefault('2m').meta({
    description: 'how long to wait for the controller-manager to run healthy with the new flags (and, after the revert, with the old ones)',
  }),
});

type State = {
  node: string;
  target: TaintEvictionTarget;
  timeoutS: number;
  /** false when it already ran without the taint-eviction controller: then apply and revert leave it as it was. */
  changed: boolean;
  /**
   * What `--controllers` gets appended: `-taint-eviction-controller`, and on 1.36+ `,-device-taint-eviction-controller`
   * (`exclusionsOf`). Absent in journals written before the device controller was turned off too: the first alone.
   */
  off?: string;
};

const MIN_MINOR = 29;

/** Evictions frozen while every other controller keeps running (Kubernetes 1.29+). */
export default defineAction<typeof Params, State>({
  meta: {
    access: [
      GET_VERSION,
      {
        ...READ_NODES,
        verbs: ['list'],
        why: 'the revert waits until no node that is back still carries the NoExecute taint it got while silent',
      },
      {
        ...READ_NODE_LEASES,
        verbs: ['list'],
        why: 'the revert tells a node that is back by its Lease renewed again, before it posts Ready',
      },
    ],
    id: 'disable-taint-eviction',
    summary:
      'Restart kube-controller-manager without the taint-eviction controller (1.29+): no pod is evicted, every other controller runs.',
    description:
      'Since Kubernetes 1.29 the pods of a node with a NoExecute taint are deleted by the `taint-eviction-controller`, ' +
      'a controller of its own inside kube-controller-manager. This remediation restarts the controller-manager with ' +
      `\`--controllers=...,${FLAG}\`: nodes are still marked NotReady and tainted, endpoints, ReplicaSets, Deployments and ` +
      'every other controller keep working, but no pod is evicted. On 1.36+ it turns off the ' +
      `\`device-taint-eviction-controller\` too (\`--controllers=...,${FLAG},${DEVICE_FLAG}\`), which runs by default there ` +
      '(GA in 1.37) and deletes the pods of ResourceClaims whose devices get a NoExecute taint (from a ResourceSlice or a ' +
      'DeviceTaintRule): both eviction paths stop. On 1.29–1.35 that controller is off unless its alpha gate ' +
      '`DRADeviceTaints` is on, and the flag is left as it was. Gentler than `stop-controller-manager`, which stops all ' +
      'of them. Preflight refuses it on a server older than 1.29 (use `stop-controller-manager` there, or give the step ' +
      '`orElse: {action: stop-controller-manager}`, which a plan takes on such servers). The revert puts the original flags ' +
      'back; undo it only once the Leases are fresh again (`rollback.waitFor`). A controller-manager that already runs ' +
      'without the taint-eviction controller is left as it is (its device controller too). `eviction-forecast` still ' +
      'predicts device taint evictions while it is applied (early, never late).',
    params: Params,
    targets: 'nodes',
    defaultNodes: 'control-plane',
    kind: 'remediation',
    stopsEvictions: 'taint-eviction',
    nodeSideWaitMs: NODE_SIDE_WAIT_S * 1000,
    minKubernetesMinor: MIN_MINOR,
    layouts: {
      kubeadm:
        'keeps `/etc/kubernetes/manifests/kube-controller-manager.yaml` in `/etc/kubernetes/kube-runbook-parked/`, writes it back with ' +
        `\`--controllers=*,${FLAG}\` (on 1.36+ \`,${DEVICE_FLAG}\` too) added (or the exclusions appended to an existing \`--controllers\`), and waits until ` +
        'the kubelet has restarted the static pod with it and `/healthz` answers',
      k3s:
        `writes \`/etc/rancher/k3s/config.yaml.d/90-kube-runbook-disable-taint-eviction.yaml\` (\`kube-controller-manager-arg: controllers=${k3sControllers(FLAG)}\`, on 1.36+ \`${k3sControllers(exclusionsOf(true))}\`) ` +
        'and restarts the `k3s` unit: k3s runs the controller-manager in its server process, so the apiserver restarts too',
      lab: `writes \`--controllers=*,${FLAG}\` (on 1.36+ \`,${DEVICE_FLAG}\` too) to the service's \`extra-args\` and restarts the lab's kube-controller-manager process`,
    },
    undo:
      'the revert first waits (up to `timeout`) until no Ready node still carries the unreachable/not-ready NoExecute taint it got while ' +
      'silent (evicting again with such a taint in place could delete its pods at once), then puts the original manifest back (kubeadm), removes the drop-in and restarts k3s (k3s) or removes `extra-args` and restarts ' +
      '(lab), then waits until the controller-manager runs healthy with the taint-eviction controller. The node-side dead-man ' +
      "runs the same script after the same kind of check, made on the node with its kubeconfig (the controller-manager's, " +
      'else admin.conf or k3s.yaml): it waits until every node is Ready and none carries those taints, checking every 5 s, ' +
      'and restores taint eviction anyway after 15 minutes, saying so in its log',
  },

  async preflight(ctx) {
    const node = targetNode(ctx, 'disable-taint-eviction');
    const version = await serverVersion(ctx.kube);
    if (!version) throw new KrError('PREFLIGHT_FAILED', "disable-taint-eviction: cannot read the server's version (GET /version)");
    if (!traitsOf(version).canDisableTaintEviction)
      throw new KrError(
        'ACTION_UNSUPPORTED',
        `disable-taint-eviction needs Kubernetes 1.${MIN_MINOR} or newer (the taint-eviction controller is part of the node lifecycle ` +
          `controller before that); the server is ${version.gitVersion}: use stop-controller-manager, or add orElse: {action: stop-controller-manager}`,
      );
    if (traitsOf(version).evictsForDeviceTaints)
      ctx.log.info(
        `disable-taint-eviction: on ${version.gitVersion} it turns off the device-taint-eviction-controller too: ` +
          'pods whose ResourceClaims use a device with a NoExecute taint are not evicted either',
      );
    await runOnNode(ctx, node.name, preflightScript(targetOf(ctx.inventory, node)), {
      code: 'PREFLIGHT_FAILED',
      message: 'disable-taint-eviction: the controller-manager cannot be restarted here',
      timeoutMs: 30_000,
    });
  },

  async prepare(ctx, params) {
    const node = targetNode(ctx, 'disable-taint-eviction');
    const target = targetOf(ctx.inventory, node);
    const r = await runOnNode(ctx, node.name, stateScript(target), {
      code: 'SERVICE_STATUS_FAILED',
      message: 'disable-taint-eviction: cannot tell how kube-controller-manager runs',
      timeoutMs: 30_000,
    });
    // the device controller's name is known to every release that runs it by default; an older one may refuse it
    const off = exclusionsOf(traitsOf(await serverVersion(ctx.kube)).evictsForDeviceTaints);
    return { node: node.name, target, timeoutS: seconds(params.timeout), changed: r.stdout.trim() !== 'disabled', off };
  },

  async apply(ctx, state) {
    if (!state.changed) {
      ctx.log.warn(
        `disable-taint-eviction: kube-controller-manager on ${state.node} already runs without the taint-eviction controller; left as it is`,
      );
      return state;
    }
    await runOnNode(ctx, state.node, applyScript(state.target, state.timeoutS, state.off), {
      code: 'SERVICE_RESTART_FAILED',
      message: 'disable-taint-eviction: could not restart kube-controller-manager without the taint-eviction controller',
      timeoutMs: execTimeoutMs(state.timeoutS),
    });
    ctx.log.info(`disable-taint-eviction: kube-controller-manager on ${state.node} runs with --controllers=...,${state.off ?? FLAG}`, {
      node: state.node,
    });
    return state;
  },

  async revert(ctx, state) {
    if (!state.changed) return;
    // evictions resume only once no node that is back still carries the taint it got while silent
    await waitForLifecycleTaintsGone(ctx, state.timeoutS * 1000, 'disable-taint-eviction revert');
    await runOnNode(ctx, state.node, revertScript(state.target, state.timeoutS, state.off), {
      code: 'SERVICE_RESTART_FAILED',
      message: 'disable-taint-eviction: could not restart kube-controller-manager with its original flags',
      timeoutMs: execTimeoutMs(state.timeoutS),
    });
    ctx.log.info(`disable-taint-eviction: kube-controller-manager on ${state.node} evicts again`, { node: state.node });
  },

  // the same check as the revert's above, on the node: it waits for the nodes before evicting again
  nodeSideRevert: (state) => (state.changed ? nodeSideRevertScript(state.target, state.timeoutS, state.off) : undefined),

  describe: (p) =>
    `restart kube-controller-manager with --controllers=...,${FLAG} (1.36+: ,${DEVICE_FLAG} too; waits up to ${formatDuration(p.timeout)})`,
});

function targetOf(inventory: Inventory, node: InventoryNode): TaintEvictionTarget {
  switch (inventory.spec.layout) {
    case 'kubeadm':
      return kubeadmTarget(inventory.spec.kubeadm?.dir.replace(/\/+$/, ''));
    case 'k3s':
      return k3sTarget();
    case 'lab': {
      const t = serviceTarget(inventory, node, 'kube-controller-manager');
      if (t.manager !== 'process')
        throw new KrError('PREFLIGHT_FAILED', `disable-taint-eviction: the lab's controller-manager on ${node.name} is not a lab process`);
      return { layout: 'lab', dir: t.dir };
    }
  }
}
