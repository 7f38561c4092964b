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
  const r = seeded(o.seed);
  const s = o.settings;
  const renewMs = s.leaseDurationMs / 4;
  const leaderFrom = o.leaderFrom ?? o.start - 3_600_000;
  const states = new Map<string, NodeState>();
  for (const n of o.nodes) {
    const renews: number[] = [];
    const stop = n.stopsAt ?? Infinity;
    if (n.lastRenew !== undefined) for (let t = n.lastRenew; t > o.start - 4 * renewMs; t -= renewMs) renews.unshift(t);
    else
      for (let t = o.start - r.next() * renewMs - 3 * renewMs; t < Math.min(stop, o.end); t += renewMs * (1 + 0.04 * r.next()))
        renews.push(t);
    states.set(n.name, { node: n, renews, seen: -1, status: 'True', transition: o.start - 3_600_000, heartbeat: o.start - r.int(60_000) });
  }
  const zones = [...new Set(o.nodes.map((n) => n.zone))];
  const queues = new Map(zones.map((z) => [z, new ZoneQueue(s.nodeEvictionRate)]));
  const zoneStates = new Map<string, ZoneState>(zones.map((z) => [z, 'Initial']));
  const podsOn = new Map<string, SimPod[]>();
  for (const p of o.pods) podsOn.set(p.node, [...(podsOn.get(p.node) ?? []), p]);
  const out: SimOutcome = { tainted: new Map(), taints: [], evicted: new Map() };
  /** Pods the taint manager will delete, by the moment. */
  const scheduled = new Map<string, number>();
  let allWasFull = false;

  // asked at moments that never go back: each node's place in its renewals moves on
  const lastRenew = (n: NodeState, t: number) => {
    while (n.seen + 1 < n.renews.length && n.renews[n.seen + 1]! <= t) n.seen++;
    return n.seen >= 0 ? n.renews[n.seen] : undefined;
  };
  const taintNode = (n: NodeState, t: number) => {
    n.taint = { added: t, since: n.taint?.since ?? t };
    out.taints.push({ node: n.node.name, at: t });
    if (!out.tainted.has(n.node.name)) out.tainted.set(n.node.name, t);
    for (const p of podsOn.get(n.node.name) ?? [])
      if (Number.isFinite(p.tolerationMs) && !scheduled.has(p.key) && !out.evicted.has(p.key)) scheduled.set(p.key, t + p.tolerationMs);
  };
  const untaint = (n: NodeState) => {
    n.taint = undefined;
    for (const p of podsOn.get(n.node.name) ?? []) scheduled.delete(p.key);
  };
  const rateFor = (state: ZoneState, size: number) =>
    state === 'PartialDisruption' ? (size > s.largeClusterSizeThreshold ? s.secondaryNodeEvictionRate : 0) : s.nodeEvictionRate;

  /** A monitor pass's work on the nodes at `t`; its handleDisruption, returned, runs when the workers are done. */
  const pass = (t: number) => {
    // the nodes as listed at the start of the pass (what master disruption mode untaints)
    const listedTainted = new Set([...states.values()].filter((n) => n.taint).map((n) => n.node.name));
    const order = r.shuffle([...states.values()]);
    const work = r.next() * PASS_WORK_MS;
    const lag = r.next() * LEASE_LAG_MS;
    order.forEach((n, k) => {
      const at = t + (work * k) / order.length;
      const before = n.status;
      const renew = lastRenew(n, at - lag);
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
      const q = queues.get(n.node.zone)!;
      if (status === 'Unknown') {
        if (!n.taint) {
          if (o.requeue) q.queue.remove(n.node.name);
          else q.queue.setRemove(n.node.name);
        }
        q.queue.add(n.node.name, at);
      }
    });
    return { at: t + work, run: () => handleDisruption(t + work, listedTainted) };
  };

  // the tainting loop runs meanwhile: a node queued and tainted during the pass was not listed at its start
  const handleDisruption = (end: number, listedTainted: ReadonlySet<string>) => {
    const newStates = new Map<string, ZoneState>();
    const sizes = new Map<string, number>();
    for (const z of zones) {
      const members = [...states.values()].filter((n) => n.node.zone === z && !n.node.excluded);
      const notReady = members.filter((n) => n.status !== 'True').length;
      sizes.set(z, members.length);
      const ready = members.length - notReady;
      newStates.set(
        z,
        ready === 0 && notReady > 0
          ? 'FullDisruption'
          : notReady > 2 && notReady / members.length >= s.unhealthyZoneThreshold
            ? 'PartialDisruption'
            : 'Normal',
      );
    }
    const allFull = [...newStates.values()].every((x) => x === 'FullDisruption');
    if (allFull && !allWasFull) {
      out.masterAt ??= end;
      for (const n of states.values()) {
        if (listedTainted.has(n.node.name)) untaint(n);
        queues.get(n.node.zone)!.queue.remove(n.node.name);
      }
      for (const q of queues.values()) q.swap(0, end);
      for (const z of zones) zoneStates.set(z, 'FullDisruption');
    } else if (!allFull) {
      for (const z of zones)
        if (zoneStates.get(z) !== newStates.get(z) || allWasFull) {
          queues.get(z)!.swap(rateFor(newStates.get(z)!, sizes.get(z)!), end);
          zoneStates.set(z, newStates.get(z)!);
        }
    }
    allWasFull = allFull;
  };

  const taintLoop = (t: number) => {
    for (const z of zones) {
      const q = queues.get(z)!;
      // Try: a token for the head, then the taint; RemoveFromQueue takes the entry off the heap, the node stays in
      // the set (an entry whose node is not in the set stays at the head and takes a token each loop)
      // an entry of a pass still under way is not in the queue before its moment (nor, then, any after it)
      for (let head = q.queue.head(); head && head.at <= t; head = q.queue.head()) {
        if (!q.bucket.tryAccept(t)) break;
        const n = states.get(head.name)!;
        if (n.status === 'Unknown') taintNode(n, t);
        q.queue.removeFromQueue(head.name);
      }
    }
  };

  const look = (t: number) => {
    const nodes: ForecastNode[] = [...states.values()].map((n) => ({
      name: n.node.name,
      zone: n.node.zone,
      ...(n.node.excluded ? { excluded: true } : {}),
      leaseRenew: lastRenew(n, t),
      ready: { status: n.status, heartbeat: seconds(n.heartbeat), transition: seconds(n.transition) },
      taints: n.taint ? [{ key: UNREACHABLE, effect: 'NoExecute', timeAdded: seconds(n.taint.added) }] : [],
      ...(n.taint ? { taintedSince: seconds(n.taint.since) } : {}),
    }));
    o.look(t, nodes);
  };

  // the events in time order: passes every monitor period, the tainting loop every 100 ms, evictions, looks
  const firstPass = Math.max(o.start, leaderFrom);
  const phase = r.next();
  let nextPass =
    o.passAt === undefined
      ? firstPass + phase * s.nodeMonitorPeriodMs
      : o.passAt - Math.floor((o.passAt - firstPass) / s.nodeMonitorPeriodMs) * s.nodeMonitorPeriodMs;
  let nextTaint = o.start + r.next() * TAINT_LOOP_MS;
  let disruption: { at: number; run: () => void } | undefined;
  let looked = 0;
  for (let t = o.start; t <= o.end;) {
    t = Math.min(nextPass, nextTaint, disruption?.at ?? Infinity, o.lookAt[looked] ?? Infinity, ...scheduled.values());
    if (t > o.end) break;
    if (t === o.lookAt[looked]) {
      looked++;
      // what happens at that very moment is not seen yet
      look(t);
      continue;
    }
    for (const [key, at] of scheduled)
      if (at === t) {
        scheduled.delete(key);
        out.evicted.set(key, t);
      }
    if (t === disruption?.at) {
      disruption.run();
      disruption = undefined;
    }
    if (t === nextPass) {
      disruption = pass(t);
      nextPass += s.nodeMonitorPeriodMs;
    }
    if (t === nextTaint) {
      taintLoop(t);
      nextTaint += TAINT_LOOP_MS;
    }
  }
  return out;
}
