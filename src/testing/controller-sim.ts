import type { ForecastNode } from '../forecast/model.js';
import type { LifecycleSettings } from '../kube/versions.js';
import { UNREACHABLE } from '../kube/tolerations.js';
import { seeded } from './seeded.js';
import { TimedQueue } from './timed-queue.js';

/*
 * A stand-in for kube-controller-manager's node lifecycle controller and taint manager, written from
 * pkg/controller/nodelifecycle, to test the eviction forecast against: kubelets renew their Leases until they stop,
 * monitor passes mark silent nodes Unknown and queue them for the NoExecute taint, each zone's queue hands out
 * taints through a token bucket (burst 1) whose rate follows the zone's state, and the taint manager deletes a pod
 * when its toleration runs out. What the forecast cannot know is drawn from a seed: the phase of the passes and of
 * the tainting loop, the renewals' jitter, and the order a pass reaches the nodes (1.34 and 1.37: its parallel
 * workers; 1.20: the lister's, a map's order), which is the order the queue hands out taints on releases that re-queue
 * every pass. The zone queues are the controller's (timed-queue.ts), so 1.20's leftover entries re-taint nodes.
 */

export interface SimNode {
  name: string;
  zone: string;
  excluded?: boolean;
  /** The kubelet's last renewal is the last one due before this moment; absent: it never stops. */
  stopsAt?: number;
  /** Its last renewal exactly (a recorded one), the others a renewal interval apart before it; over stopsAt. */
  lastRenew?: number;
}

export interface SimPod {
  key: string;
  node: string;
  /** How long it tolerates the unreachable taint (ms); Infinity: forever. */
  tolerationMs: number;
}

export interface SimOptions {
  settings: LifecycleSettings;
  /**
   * Every pass, markNodeForTainting takes each untainted NotReady node off its zone's queue and adds it again. 1.34
   * and 1.37 (Remove): off the set and the heap, so the queue's order is the order of the pass's workers. 1.20
   * (SetRemove): off the set only, so each pass leaves one more entry in the heap; the first keeps the node's place
   * (first in, first out), and each leftover popped after the taint re-taints it (a new timeAdded) and takes a token.
   */
  requeue: boolean;
  /** The node is queued in the pass that marks it Unknown (1.21+), or one pass later (1.20). */
  taintsInTheSamePass: boolean;
  nodes: SimNode[];
  pods: SimPod[];
  seed: number;
  start: number;
  end: number;
  /** A moment a monitor pass started (as a controller's log shows), the others a period apart; default: drawn. */
  passAt?: number;
  /** The controller starts (a new leader, nothing in memory) at this moment; default: it has run all along. */
  leaderFrom?: number;
  /** Moments to show the cluster as the API has it (sorted). */
  lookAt: readonly number[];
  look(at: number, nodes: ForecastNode[]): void;
}

export interface SimOutcome {
  /** Per node, when it first got the NoExecute taint. */
  tainted: Map<string, number>;
  /** Every write of the taint, in order: a node's first taint and each re-taint by a leftover queue entry (1.20). */
  taints: { node: string; at: number }[];
  /** Per pod, when the taint manager deleted it. */
  evicted: Map<string, number>;
  /** When the controller entered master disruption mode, if it did. */
  masterAt?: number;
}

const PASS_WORK_MS = 200;
/** How late the controller's Lease informer may hand it a renewal. */
const LEASE_LAG_MS = 100;
const TAINT_LOOP_MS = 100;
const seconds = (t: number) => Math.floor(t / 1000) * 1000;

/** A token bucket of burst 1 (client-go's flowcontrol on x/time/rate): a new one starts full; rate 0 never accepts. */
class Bucket {
  private tokens = 1;
  private last = -Infinity;
  constructor(readonly rate: number) {}

  tryAccept(t: number): boolean {
    if (this.rate <= 0) return false;
    this.tokens = Math.min(1, this.tokens + (this.last === -Infinity ? 1 : ((t - this.last) * this.rate) / 1000));
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** A zone's RateLimitedTimedQueue: the controller's UniqueQueue and a token bucket. */
class ZoneQueue {
  readonly queue = new TimedQueue();
  bucket: Bucket;
  constructor(rate: number) {
    this.bucket = new Bucket(rate);
  }
  /** SwapLimiter: a new bucket at the new rate, drained when the old one had no token. */
  swap(rate: number, t: number): void {
    if (rate === this.bucket.rate) return;
    const next = new Bucket(rate);
    if (rate > 0 && !this.bucket.tryAccept(t)) next.tryAccept(t);
    this.bucket = next;
  }
}

type Status = 'True' | 'Unknown';
type ZoneState = 'Initial' | 'Normal' | 'PartialDisruption' | 'FullDisruption';

interface NodeState {
  node: SimNode;
  renews: number[];
  /** The last of `renews` done by the last moment asked (-1: none). */
  seen: number;
  status: Status;
  transition: number;
  heartbeat: number;
  /** The controller's memory (nodeHealthMap): when it last saw a new renewal, and which. */
  probe?: number;
  seenRenew?: number;
  taint?: { added: number; since: number };
}

export function simulateController(o: SimOptions): SimOutcome {
  return new ControllerSim(o).run();
}

/** One simulation: the nodes as the controller holds them, its zone queues, and the pods its taint manager will delete. */
class ControllerSim {
  private readonly r: ReturnType<typeof seeded>;
  private readonly s: LifecycleSettings;
  private readonly states = new Map<string, NodeState>();
  private readonly zones: string[];
  private readonly queues: Map<string, ZoneQueue>;
  private readonly zoneStates: Map<string, ZoneState>;
  private readonly podsOn = new Map<string, SimPod[]>();
  private readonly out: SimOutcome = { tainted: new Map(), taints: [], evicted: new Map() };
  /** Pods the taint manager will delete, by the moment. */
  private readonly scheduled = new Map<string, number>();
  private allWasFull = false;

  constructor(private readonly o: SimOptions) {
    this.r = seeded(o.seed);
    this.s = o.settings;
    for (const n of o.nodes) this.states.set(n.name, this.nodeState(n));
    this.zones = [...new Set(o.nodes.map((n) => n.zone))];
    this.queues = new Map(this.zones.map((z) => [z, new ZoneQueue(this.s.nodeEvictionRate)]));
    this.zoneStates = new Map<string, ZoneState>(this.zones.map((z) => [z, 'Initial']));
    for (const p of o.pods) this.podsOn.set(p.node, [...(this.podsOn.get(p.node) ?? []), p]);
  }

  /** A node's kubelet renewals (recorded or drawn) and its Ready condition before the start. */
  private nodeState(n: SimNode): NodeState {
    const { o, r } = this;
    const renewMs = this.s.leaseDurationMs / 4;
    const renews: number[] = [];
    const stop = n.stopsAt ?? Infinity;
    if (n.lastRenew !== undefined) for (let t = n.lastRenew; t > o.start - 4 * renewMs; t -= renewMs) renews.unshift(t);
    else
      for (let t = o.start - r.next() * renewMs - 3 * renewMs; t < Math.min(stop, o.end); t += renewMs * (1 + 0.04 * r.next()))
        renews.push(t);
    return { node: n, renews, seen: -1, status: 'True', transition: o.start - 3_600_000, heartbeat: o.start - r.int(60_000) };
  }

  /** The events in time order: passes every monitor period, the tainting loop every 100 ms, evictions, looks. */
  run(): SimOutcome {
    const { o, r, s } = this;
    const firstPass = Math.max(o.start, o.leaderFrom ?? o.start - 3_600_000);
    const phase = r.next();
    let nextPass =
      o.passAt === undefined
        ? firstPass + phase * s.nodeMonitorPeriodMs
        : o.passAt - Math.floor((o.passAt - firstPass) / s.nodeMonitorPeriodMs) * s.nodeMonitorPeriodMs;
    let nextTaint = o.start + r.next() * TAINT_LOOP_MS;
    let disruption: { at: number; run: () => void } | undefined;
    let looked = 0;
    for (let t = o.start; t <= o.end;) {
      t = Math.min(nextPass, nextTaint, disruption?.at ?? Infinity, o.lookAt[looked] ?? Infinity, ...this.scheduled.values());
      if (t > o.end) break;
      if (t === o.lookAt[looked]) {
        looked++;
        // what happens at that very moment is not seen yet
        this.look(t);
        continue;
      }
      this.evict(t);
      if (t === disruption?.at) {
        disruption.run();
        disruption = undefined;
      }
      if (t === nextPass) {
        disruption = this.pass(t);
        nextPass += s.nodeMonitorPeriodMs;
      }
      if (t === nextTaint) {
        this.taintLoop(t);
        nextTaint += TAINT_LOOP_MS;
      }
    }
    return this.out;
  }

  /** The taint manager deletes the pods whose toleration ends at `t`. */
  private evict(t: number): void {
    for (const [key, at] of this.scheduled)
      if (at === t) {
        this.scheduled.delete(key);
        this.out.evicted.set(key, t);
      }
  }

  // asked at moments that never go back: each node's place in its renewals moves on
  private lastRenew(n: NodeState, t: number): number | undefined {
    while (n.seen + 1 < n.renews.length && n.renews[n.seen + 1]! <= t) n.seen++;
    return n.seen >= 0 ? n.renews[n.seen] : undefined;
  }

  private taintNode(n: NodeState, t: number): void {
    const { out, scheduled } = this;
    n.taint = { added: t, since: n.taint?.since ?? t };
    out.taints.push({ node: n.node.name, at: t });
    if (!out.tainted.has(n.node.name)) out.tainted.set(n.node.name, t);
    for (const p of this.podsOn.get(n.node.name) ?? [])
      if (Number.isFinite(p.tolerationMs) && !scheduled.has(p.key) && !out.evicted.has(p.key)) scheduled.set(p.key, t + p.tolerationMs);
  }

  private untaint(n: NodeState): void {
    n.taint = undefined;
    for (const p of this.podsOn.get(n.node.name) ?? []) this.scheduled.delete(p.key);
  }

  private rateFor(state: ZoneState, size: number): number {
    const { s } = this;
    return state === 'PartialDisruption' ? (size > s.largeClusterSizeThreshold ? s.secondaryNodeEvictionRate : 0) : s.nodeEvictionRate;
  }

  /** A monitor pass's work on the nodes at `t`; its handleDisruption, returned, runs when the workers are done. */
  private pass(t: number): { at: number; run: () => void } {
    const { r } = this;
    // the nodes as listed at the start of the pass (what master disruption mode untaints)
    const listedTainted = new Set([...this.states.values()].filter((n) => n.taint).map((n) => n.node.name));
    const order = r.shuffle([...this.states.values()]);
    const work = r.next() * PASS_WORK_MS;
    const lag = r.next() * LEASE_LAG_MS;
    order.forEach((n, k) => this.monitor(n, t + (work * k) / order.length, lag));
    return { at: t + work, run: () => this.handleDisruption(t + work, listedTainted) };
  }

  /** One node in a pass at `at`: a new renewal seen, Unknown after the grace period, queued for the taint. */
  private monitor(n: NodeState, at: number, lag: number): void {
    const { o, s } = this;
    const before = n.status;
    const renew = this.lastRenew(n, at - lag);
    if (n.probe === undefined) n.probe = at;
    if (renew !== undefined && renew !== n.seenRenew) {
      n.seenRenew = renew;
      n.probe = at;
    }
    if (n.status === 'True' && at > n.probe + s.nodeMonitorGracePeriodMs) {
      n.status = 'Unknown';
      n.transition = at;
    }
    const status = o.taintsInTheSamePass ? n.status : before;
    const q = this.queues.get(n.node.zone)!;
    if (status === 'Unknown') {
      if (!n.taint) {
        if (o.requeue) q.queue.remove(n.node.name);
        else q.queue.setRemove(n.node.name);
      }
      q.queue.add(n.node.name, at);
    }
  }

  /** Each zone's state from its members' Ready, and the sizes its rate depends on. */
  private zoneStatesNow(): { newStates: Map<string, ZoneState>; sizes: Map<string, number> } {
    const newStates = new Map<string, ZoneState>();
    const sizes = new Map<string, number>();
    for (const z of this.zones) {
      const members = [...this.states.values()].filter((n) => n.node.zone === z && !n.node.excluded);
      const notReady = members.filter((n) => n.status !== 'True').length;
      sizes.set(z, members.length);
      const ready = members.length - notReady;
      newStates.set(
        z,
        ready === 0 && notReady > 0
          ? 'FullDisruption'
          : notReady > 2 && notReady / members.length >= this.s.unhealthyZoneThreshold
            ? 'PartialDisruption'
            : 'Normal',
      );
    }
    return { newStates, sizes };
  }

  // the tainting loop runs meanwhile: a node queued and tainted during the pass was not listed at its start
  private handleDisruption(end: number, listedTainted: ReadonlySet<string>): void {
    const { zones, queues, zoneStates } = this;
    const { newStates, sizes } = this.zoneStatesNow();
    const allFull = [...newStates.values()].every((x) => x === 'FullDisruption');
    if (allFull && !this.allWasFull) {
      this.out.masterAt ??= end;
      for (const n of this.states.values()) {
        if (listedTainted.has(n.node.name)) this.untaint(n);
        queues.get(n.node.zone)!.queue.remove(n.node.name);
      }
      for (const q of queues.values()) q.swap(0, end);
      for (const z of zones) zoneStates.set(z, 'FullDisruption');
    } else if (!allFull) {
      for (const z of zones)
        if (zoneStates.get(z) !== newStates.get(z) || this.allWasFull) {
          queues.get(z)!.swap(this.rateFor(newStates.get(z)!, sizes.get(z)!), end);
          zoneStates.set(z, newStates.get(z)!);
        }
    }
    this.allWasFull = allFull;
  }

  private taintLoop(t: number): void {
    for (const z of this.zones) {
      const q = this.queues.get(z)!;
      // Try: a token for the head, then the taint; RemoveFromQueue takes the entry off the heap, the node stays in
      // the set (an entry whose node is not in the set stays at the head and takes a token each loop)
      // an entry of a pass still under way is not in the queue before its moment (nor, then, any after it)
      for (let head = q.queue.head(); head && head.at <= t; head = q.queue.head()) {
        if (!q.bucket.tryAccept(t)) break;
        const n = this.states.get(head.name)!;
        if (n.status === 'Unknown') this.taintNode(n, t);
        q.queue.removeFromQueue(head.name);
      }
    }
  }

  private look(t: number): void {
    const nodes: ForecastNode[] = [...this.states.values()].map((n) => ({
      name: n.node.name,
      zone: n.node.zone,
      ...(n.node.excluded ? { excluded: true } : {}),
      leaseRenew: this.lastRenew(n, t),
      ready: { status: n.status, heartbeat: seconds(n.heartbeat), transition: seconds(n.transition) },
      taints: n.taint ? [{ key: UNREACHABLE, effect: 'NoExecute', timeAdded: seconds(n.taint.added) }] : [],
      ...(n.taint ? { taintedSince: seconds(n.taint.since) } : {}),
    }));
    this.o.look(t, nodes);
  }
}
