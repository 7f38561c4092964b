import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { nextRenewDelay, retryDelay, statusDue } from './timing.js';
import { statusOf } from './api.js';
import { conditionsChanged, leaseObject, nodeObject, nodeStatus } from './objects.js';
import { PodWorker } from './pods.js';
import type { NodeSimDeps } from './deps.js';
import type { NodeLite, PodLite, SimNodeConfig, WatchEventType } from './types.js';

export type { NodeSimDeps } from './deps.js';

/**
 * One simulated kubelet: registers its Node, renews its Lease, posts NodeStatus on change and periodically,
 * and runs the pods bound to it as simulated containers. Cut off from the apiserver it keeps its containers;
 * back in contact it kills those of pods deleted or marked for deletion meanwhile and finalizes the deletions.
 */
export class NodeSim {
  private nodeUid: string | undefined;
  private leaseRv: string | undefined;
  private lastStatusPost: number | undefined;
  private failures = 0;
  private readonly podWorker: PodWorker;
  renewals = 0;
  lastRenewAt: number | undefined;
  /** Longest time between two successful renewals (reset by whoever measures). */
  maxRenewGapMs = 0;

  constructor(
    readonly cfg: SimNodeConfig,
    private readonly d: NodeSimDeps,
  ) {
    this.podWorker = new PodWorker(cfg, d);
  }

  /** Registers, then renews the lease and checks the status until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock } = this.d;
    try {
      if (this.d.firstRenewDelayMs) await clock.sleep(this.d.firstRenewDelayMs, signal);
      await this.register(signal);
      await Promise.all([this.leaseLoop(signal), this.statusLoop(signal)]);
    } catch (e) {
      if (!signal.aborted) throw e;
    }
  }

  private async register(signal: AbortSignal): Promise<void> {
    for (let attempt = 1; !signal.aborted; attempt++) {
      try {
        const existing = await this.d.api.readNode(this.cfg.name);
        if (existing) {
          this.nodeUid = existing.metadata.uid;
          await this.postStatus(existing);
        } else {
          const created = await this.d.api.createNode(nodeObject(this.cfg, this.d.clock.now()));
          this.nodeUid = created.metadata.uid;
          this.lastStatusPost = this.d.clock.now();
        }
        this.d.log.info(`registered node ${this.cfg.name}`);
        return;
      } catch (e) {
        if (attempt === 1 || attempt % 10 === 0) this.d.log.warn(`registering node ${this.cfg.name}: ${messageOf(e)}`);
        await this.d.clock.sleep(retryDelay(attempt, this.cfg.leaseDurationMs), signal);
      }
    }
  }

  private async leaseLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let delay: number;
      try {
        await this.renew();
        const now = this.d.clock.now();
        if (this.lastRenewAt !== undefined) this.maxRenewGapMs = Math.max(this.maxRenewGapMs, now - this.lastRenewAt);
        this.renewals++;
        this.lastRenewAt = now;
        this.d.onRenewed?.(now);
        if (this.failures) {
          this.d.log.info(`lease of ${this.cfg.name} renewed again after ${this.failures} failure(s)`);
          this.failures = 0;
          this.d.onReconnect?.();
          void this.checkStatus().catch(() => {});
        }
        delay = nextRenewDelay(this.cfg.leaseDurationMs, this.d.random());
      } catch (e) {
        this.failures++;
        if (this.failures === 1 || this.failures % 20 === 0)
          this.d.log.warn(`renewing the lease of ${this.cfg.name}: ${messageOf(e)}`, { failures: this.failures });
        // a connection that stopped answering (a restarted forwarder, a NAT entry gone) is not used again
        if (this.failures > 1) this.d.onRepeatedFailure?.();
        delay = retryDelay(this.failures, this.cfg.leaseDurationMs);
      }
      await this.d.clock.sleep(delay, signal);
    }
  }

  /** One renewal: update with the last resourceVersion seen; on conflict or absence read or create it. */
  async renew(): Promise<void> {
    const api = this.d.api;
    if (this.leaseRv === undefined) {
      const current = await api.readLease(this.cfg.name);
      if (!current) {
        const made = await api.createLease(leaseObject(this.cfg, this.d.clock.now(), { nodeUid: this.nodeUid }));
        this.leaseRv = made.metadata?.resourceVersion;
        return;
      }
      this.leaseRv = (current as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    }
    try {
      const body = leaseObject(this.cfg, this.d.clock.now(), { resourceVersion: this.leaseRv, nodeUid: this.nodeUid });
      const updated = await api.replaceLease(this.cfg.name, body);
      this.leaseRv = updated.metadata?.resourceVersion;
    } catch (e) {
      const code = statusOf(e);
      if (code === 409 || code === 404) this.leaseRv = undefined;
      throw e;
    }
  }

  private async statusLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.d.clock.sleep(this.cfg.statusCheckMs, signal);
      try {
        await this.checkStatus();
      } catch (e) {
        this.d.log.debug(`status of ${this.cfg.name}: ${messageOf(e)}`);
      }
    }
  }

  /** Posts NodeStatus when the Node's conditions differ from ours or the report frequency has passed. */
  async checkStatus(): Promise<void> {
    const node = this.d.cachedNode ? this.d.cachedNode() : await this.d.api.readNode(this.cfg.name);
    // a shared watch that has not seen the node yet is no reason to post (it would flood a lagging apiserver)
    if (!node && this.d.cachedNode) return;
    if (!node) {
      this.d.log.warn(`node ${this.cfg.name} is gone from the apiserver; registering it again`);
      const created = await this.d.api.createNode(nodeObject(this.cfg, this.d.clock.now()));
      this.nodeUid = created.metadata.uid;
      this.leaseRv = undefined;
      return;
    }
    const changed = conditionsChanged(node);
    if (
      statusDue({
        lastPostMs: this.lastStatusPost,
        nowMs: this.d.clock.now(),
        reportFrequencyMs: this.cfg.statusReportFrequencyMs,
        changed,
      })
    )
      await this.postStatus(node);
  }

  private async postStatus(node: NodeLite | undefined): Promise<void> {
    const now = this.d.clock.now();
    await this.d.api.patchNodeStatus(this.cfg.name, { status: nodeStatus(this.cfg, node, now) });
    this.lastStatusPost = now;
  }

  /** The full set of pods bound here (after a list). */
  onPods(pods: PodLite[]): Promise<void> {
    return this.podWorker.onPods(pods);
  }

  onPodEvent(type: WatchEventType, pod: PodLite): Promise<void> {
    return this.podWorker.onPodEvent(type, pod);
  }
}
