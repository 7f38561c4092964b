import { randomBytes } from 'node:crypto';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import type { SimContainer } from './runtime.js';
import { retryDelay } from './timing.js';
import type { NodeSimDeps } from './deps.js';
import { freePodIp, podStatusCurrent, podStatusPatch, wholeTime } from './objects.js';
import { decidePod, orphanedPods, REASON_DELETED, REASON_GONE } from './reconcile.js';
import type { PodLite, SimNodeConfig, WatchEventType } from './types.js';

/**
 * The pods of one simulated kubelet: runs those bound to it as simulated containers and reports them Running;
 * kills the containers of pods deleted or marked for deletion (also those deleted while it was cut off, found
 * at the next list) and finalizes the deletions. Work runs one item at a time, in arrival order.
 */
export class PodWorker {
  private queue: Promise<void> = Promise.resolve();
  /** Latest version of each pod bound here, by uid (for retries). */
  private readonly pods = new Map<string, PodLite>();
  private readonly retrying = new Set<string>();

  constructor(
    readonly cfg: SimNodeConfig,
    private readonly d: Pick<NodeSimDeps, 'api' | 'clock' | 'log' | 'runtime' | 'processes'>,
  ) {
    if (d.processes)
      d.processes.onChange = (uid) => {
        const latest = this.pods.get(uid);
        if (latest) void this.enqueue(() => this.report(latest));
      };
  }

  /** The full set of pods bound here (after a list): kill containers of pods that are gone, sync the rest. */
  onPods(pods: PodLite[]): Promise<void> {
    this.pods.clear();
    for (const pod of pods) this.pods.set(pod.metadata.uid ?? '', pod);
    return this.enqueue(async () => {
      for (const gone of orphanedPods(this.d.runtime.list(), pods))
        await this.kill(gone.podUid, `${gone.namespace}/${gone.pod}`, REASON_GONE);
      for (const pod of pods) await this.trySync(pod);
    });
  }

  onPodEvent(type: WatchEventType, pod: PodLite): Promise<void> {
    const uid = pod.metadata.uid ?? '';
    if (type === 'DELETED') this.pods.delete(uid);
    else this.pods.set(uid, pod);
    return this.enqueue(async () => {
      if (type === 'DELETED') await this.kill(uid, podKey(pod), REASON_DELETED);
      else await this.trySync(pod);
    });
  }

  /** Syncs a pod; when the apiserver refuses or is unreachable, tries the pod's latest version again shortly. */
  private async trySync(pod: PodLite): Promise<void> {
    try {
      await this.syncPod(pod);
    } catch (e) {
      const uid = pod.metadata.uid ?? '';
      this.d.log.debug(`${podKey(pod)}: ${messageOf(e)}`);
      if (this.retrying.has(uid)) return;
      this.retrying.add(uid);
      this.d.clock.setTimer(retryDelay(2, this.cfg.leaseDurationMs) * 2, () => {
        this.retrying.delete(uid);
        const latest = this.pods.get(uid);
        if (latest) void this.enqueue(() => this.trySync(latest));
      });
    }
  }

  private async syncPod(pod: PodLite): Promise<void> {
    const uid = pod.metadata.uid ?? '';
    const containers = this.d.runtime.ofPod(uid);
    const processes = this.d.processes;
    // a process container this simulator ran before it restarted: adopted (or started again)
    if (processes?.handles(pod) && containers.length && !processes.state(uid) && !pod.metadata.deletionTimestamp)
      await processes.start(pod);
    const state = processes?.state(uid);
    const action = decidePod(pod, containers, podStatusCurrent(pod, containers) && (state === undefined || state.kind === 'running'));
    switch (action.kind) {
      case 'kill-and-finalize':
        await this.kill(uid, podKey(pod), action.reason);
        await this.d.api.finalizePod(pod.metadata.namespace ?? 'default', pod.metadata.name, uid);
        return;
      case 'finalize':
        await this.d.api.finalizePod(pod.metadata.namespace ?? 'default', pod.metadata.name, uid);
        return;
      case 'start':
        await this.d.runtime.start(this.newContainers(pod));
        if (processes?.handles(pod)) await processes.start(pod);
        await this.report(pod);
        return;
      case 'report':
        await this.report(pod);
        return;
      case 'none':
        return;
    }
  }

  private async report(pod: PodLite): Promise<void> {
    const containers = this.d.runtime.ofPod(pod.metadata.uid ?? '');
    const patch = podStatusPatch(this.cfg.ip, containers, this.d.clock.now(), this.d.processes?.state(pod.metadata.uid ?? ''));
    await this.d.api.patchPodStatus(pod.metadata.namespace ?? 'default', pod.metadata.name, patch);
  }

  private async kill(podUid: string, key: string, reason: string): Promise<void> {
    const records = await this.d.runtime.kill(podUid, reason, this.d.clock.now());
    await this.d.processes?.stop(podUid);
    if (records.length) this.d.log.warn(`killed ${records.length} container(s) of ${key}: ${reason}`);
  }

  private newContainers(pod: PodLite): SimContainer[] {
    const podIp = freePodIp(this.cfg.podCidr, this.d.runtime.podIps()) ?? '0.0.0.0';
    const startedAt = wholeTime(this.d.clock.now());
    return (pod.spec?.containers ?? [{ name: 'main', image: 'none' }]).map((c) => ({
      id: randomBytes(12).toString('hex'),
      namespace: pod.metadata.namespace ?? 'default',
      pod: pod.metadata.name,
      podUid: pod.metadata.uid ?? '',
      container: c.name,
      image: c.image ?? 'none',
      podIp,
      startedAt,
    }));
  }

  /** Pod work runs one item at a time, in arrival order; a failure is logged and the pod is retried at the next sync. */
  private enqueue(fn: () => Promise<void>): Promise<void> {
    const next = this.queue.then(fn).catch((e: unknown) => this.d.log.warn(`${this.cfg.name}: ${messageOf(e)}`));
    this.queue = next;
    return next;
  }
}

function podKey(pod: PodLite): string {
  return `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name}`;
}
