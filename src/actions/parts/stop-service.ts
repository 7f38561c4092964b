import { z } from 'zod';
import { defineAction, type Action, type ActionMeta } from '../../contract/action.js';
import { formatDuration } from '../../core/duration.js';
import { duration } from '../../core/zod-helpers.js';
import { describeTarget, kubeadmDirOf, runOnNode, serviceManager, serviceTarget, targetNode } from '../../nodes/services/index.js';
import { execTimeoutMs, KR_FAIL, script, seconds } from '../../nodes/services/script.js';
import { STATUS_STOPPED, type ServiceName, type ServiceTarget } from '../../nodes/services/types.js';
import { controlPlaneKubeconfigs, KR_API_GET, KR_LEASES_RENEWED, waitBeforeActing } from './node-api.js';

export const StopParams = z.strictObject({
  timeout: duration().prefault('2m').meta({
    description: 'how long to wait for the service to be gone after stopping it, and to be healthy again after the revert starts it',
  }),
});
export type StopParams = typeof StopParams;

export type StopState = {
  node: string;
  target: ServiceTarget;
  timeoutS: number;
  /** false when the service was already stopped: then apply and revert leave it as it was. */
  wasRunning: boolean;
};

export interface ServiceStopSpec extends Omit<ActionMeta<StopParams>, 'params' | 'targets' | 'undo' | 'access'> {
  service: ServiceName;
  /** Said in preflight's log on k3s servers, where one unit runs the whole control plane. */
  k3sWarning?: string;
  /**
   * The node-side revert starts the service only once every node's Lease is renewed again (`leasesRenewedFirst`):
   * for a component whose start, while kubelets are silent, is the eviction cascade (the controller-manager).
   */
  leasesRenewedFirst?: boolean;
}

/**
 * How long a node-side revert waits, at most, for every node Lease to be renewed before it starts the service anyway:
 * it runs when the executor has been gone for remediationTtl, and after that nobody else may be left to start it.
 */
const LEASES_WAIT_S = 900;

/**
 * The dead-man's start of a service that must wait for the kubelets: every `everyS` it reads the node Leases and
 * starts the service once each was renewed since the read before (`kr_leases_renewed`), or at `capS` anyway, saying
 * so. Unreadable Leases count as not renewed (it fails closed until the cap). Everything it says goes to revert.log.
 */
export function leasesFirstScript(id: string, target: ServiceTarget, start: string, capS = LEASES_WAIT_S, everyS = 15): string {
  const layout = target.manager === 'process' ? 'lab' : target.manager === 'static-pod' ? 'kubeadm' : 'k3s';
  const kubeconfigs = controlPlaneKubeconfigs(
    layout,
    target.manager === 'process' ? target.dir : target.manager === 'static-pod' ? kubeadmDirOf(target.manifest) : undefined,
  );
  return script(
    `${id} node-side revert: node Leases renewed first`,
    { kubeconfigs: kubeconfigs.join('\n'), cap_s: capS, every_s: everyS },
    KR_FAIL,
    KR_API_GET,
    KR_LEASES_RENEWED,
    ...waitBeforeActing('kr_leases_renewed', 'kubelets heartbeat', 'starting it'),
    // the start script's own lines after its header (`# kube-runbook: …` and `set -u`)
    ...start.split('\n').slice(2),
  );
}

/**
 * An action that stops one component on each selected node through the layout's service manager, and whose
 * revert (and node-side dead-man) starts it again and waits until it is healthy.
 */
export function serviceStopAction(spec: ServiceStopSpec): Action<StopParams, StopState> {
  const { service, k3sWarning, leasesRenewedFirst, ...meta } = spec;
  return defineAction<StopParams, StopState>({
    meta: {
      ...meta,
      ...(leasesRenewedFirst ? { nodeSideWaitMs: LEASES_WAIT_S * 1000 } : {}),
      access: [],
      params: StopParams,
      targets: 'nodes',
      undo:
        'the revert starts the service again (systemctl start / the manifest moved back / the lab start script) and waits until it is healthy; ' +
        'the node-side dead-man runs the same start script by itself after `faultTtl` without keepalive' +
        (leasesRenewedFirst ? ', once every node Lease is renewed again (at most 15 minutes later)' : ''),
    },

    async preflight(ctx) {
      const node = targetNode(ctx, meta.id);
      const target = serviceTarget(ctx.inventory, node, service);
      if (ctx.inventory.spec.layout === 'k3s' && target.manager === 'systemd' && target.unit === 'k3s' && k3sWarning)
        ctx.log.warn(`${meta.id} on ${node.name}: ${k3sWarning}`, { node: node.name, unit: target.unit });
      await runOnNode(ctx, node.name, serviceManager(target).preflight(target), {
        code: 'PREFLIGHT_FAILED',
        message: `${meta.id}: ${describeTarget(target)} is not ready to be stopped`,
        timeoutMs: 30_000,
      });
    },

    async prepare(ctx, params) {
      const node = targetNode(ctx, meta.id);
      const target = serviceTarget(ctx.inventory, node, service);
      const r = await runOnNode(ctx, node.name, serviceManager(target).status(target), {
        code: 'SERVICE_STATUS_FAILED',
        message: `${meta.id}: cannot tell whether ${describeTarget(target)} runs`,
        timeoutMs: 30_000,
        okCodes: [STATUS_STOPPED],
      });
      return { node: node.name, target, timeoutS: seconds(params.timeout), wasRunning: r.code === 0 };
    },

    async apply(ctx, state) {
      if (!state.wasRunning) {
        ctx.log.warn(`${meta.id}: ${describeTarget(state.target)} on ${state.node} was not running; left as it is`, { node: state.node });
        return state;
      }
      await runOnNode(ctx, state.node, serviceManager(state.target).stop(state.target, state.timeoutS), {
        code: 'SERVICE_STOP_FAILED',
        message: `${meta.id}: could not stop ${describeTarget(state.target)}`,
        timeoutMs: execTimeoutMs(state.timeoutS),
      });
      ctx.log.info(`${meta.id}: stopped ${describeTarget(state.target)} on ${state.node}`, { node: state.node });
      return state;
    },

    async revert(ctx, state) {
      if (!state.wasRunning) return;
      await runOnNode(ctx, state.node, serviceManager(state.target).start(state.target, state.timeoutS), {
        code: 'SERVICE_START_FAILED',
        message: `${meta.id}: could not start ${describeTarget(state.target)} again`,
        timeoutMs: execTimeoutMs(state.timeoutS),
      });
      ctx.log.info(`${meta.id}: ${describeTarget(state.target)} on ${state.node} is healthy again`, { node: state.node });
    },

    nodeSideRevert: (state) => {
      if (!state.wasRunning)
        return script(`${meta.id} node-side revert: nothing to undo`, {}, ': # the service was not running before the run');
      const start = serviceManager(state.target).start(state.target, state.timeoutS);
      return leasesRenewedFirst ? leasesFirstScript(meta.id, state.target, start) : start;
    },

    describe: (params) => `stop ${service} on each node (waits up to ${formatDuration(params.timeout)})`,
  });
}
