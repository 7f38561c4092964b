import { type ForecastNode, type PodGroup, isControllerTaint, isSound, lastHeartbeatOf } from './model.js';
import { FeedPods, type NodePods, groupsOf } from './feed-pods.js';
import { ForecastStore } from './store.js';
import { byCodeUnit } from '../core/order.js';
import { NODE_LEASE_NAMESPACE, type SlimLease, type SlimNode, type SlimPod, type SlimTaint, zoneOf } from '../kube/resources.js';
import type { WatchHandle } from '../kube/watch.js';

/**
 * What the eviction forecast reads of the cluster, kept up to date by the watch handlers so that a judgement costs
 * what the failing nodes cost, not what the fleet does: per node its Node and its lease's last renewal side by side
 * (no lookup of a lease per node and judgement), its zone worked out once per Node object, the number of nodes per
 * zone, and per node its pods grouped by tolerations.
 */
export interface ForecastFeed {
  /** The lease renewal of the node named, as last seen. */
  renewOf(name: string): number | undefined;
  /** Whether the node named is failing now (isFailing), with its lease renewed at `renew` if given; false for a node not known. */
  failing(name: string | undefined, now: number, silentAfter: number, renew?: number): boolean;
  /**
   * The failing nodes as the forecast reads them, by name; the others counted per zone; the first moment a node not
   * silent may fall silent (a healthy one then fails, a failing one still heartbeating is then judged silent); and a
   * number that changes whenever the set of failing nodes does. While no Node or Lease changed and no node can
   * have fallen silent, the same answer is handed out again, only the pods of nodes whose pods changed looked at.
   */
  fleet(
    now: number,
    silentAfter: number,
  ): { nodes: ForecastNode[]; healthy: Map<string, number>; firstSilence: number; failingSet: number };
  /** The pods on the node named that the forecast judges: not being deleted, and in `namespaces` when given. */
  podsOn(name: string): readonly PodGroup[];
  /**
   * The judging memory of this feed's fleet, to hand to every forecast of it (forecast(input, store)): rows of its
   * nodes kept between judgements, a node's dropped when its Node goes. Each feed has its own.
   */
  readonly store: ForecastStore;
}

const EXCLUDED = 'node.kubernetes.io/exclude-disruption';

/** Every node without taints is given this one empty array: a judgement reads it, not one array per node. */
const NO_TAINTS = Object.freeze([]) as unknown as SlimTaint[];

/** A zone's nodes counted in its state (not excluded from disruption checks), and how many of them the last pass found failing. */
interface ZoneCount {
  name: string;
  size: number;
  failing: number;
}

/**
 * What the feed keeps of a node while it exists: the node as the forecast reads it, kept up to date by the watch
 * handlers as its Node and its Lease change (its pods and taintedSince are filled in by the pass that finds it
 * failing), so that a judgement reads thousands of failing nodes without making an object for each.
 */
interface Kept {
  node: ForecastNode;
  /** Ready and without the controller's NoExecute taint (isSound): failing only once it falls silent. */
  sound: boolean;
  controllerTainted: boolean;
  /** Its zone, when it counts in its zone's state. */
  counted?: ZoneCount;
  /** Its pods, held by FeedPods. */
  pods: NodePods;
}

/** The options of forecastFeed. */
interface FeedOptions {
  namespaces?: ReadonlySet<string>;
  /** Whether the pods on the node named are judged (all when not given). */
  podsOf?: (node: string) => boolean;
  taintedSince(node: string): number | undefined;
}

export function forecastFeed(
  nodes: WatchHandle<SlimNode>,
  leases: WatchHandle<SlimLease>,
  pods: WatchHandle<SlimPod>,
  o: FeedOptions,
): ForecastFeed {
  return new Feed(nodes, leases, pods, o);
}

/** isFailing, on a node kept and its last heartbeat: failing (-Infinity), or the moment it may fall silent. */
const silentFrom = (k: Kept, beat: number | undefined): number => (!k.sound || beat === undefined ? -Infinity : beat);

class Feed implements ForecastFeed {
  readonly store = new ForecastStore();
  private readonly kept = new Map<string, Kept>();
  // the nodes by name, worked out again when a node comes or goes
  private byName: Kept[] | undefined;
  private readonly zones = new Map<string, ZoneCount>();
  // Per node its pods' groups, kept by the pods watch: a pod's key is put in (or taken out of) its group's sorted
  // keys as it comes and goes, so that the first judgement after many nodes fail at once does not group their pods.
  private readonly feedPods: FeedPods;
  // What changed since the last fleet(): a Node or a Lease (the failing nodes are found again in a pass over every
  // node), or only the pods of some nodes (their groups are handed out again, nothing else).
  private nodesChanged = true;
  private readonly podsChanged = new Set<Kept>();
  // the failing nodes as the last fleet() found them, and the number that changes with them
  private lastFailing: Kept[] = [];
  private failingSet = 0;
  // the last fleet(), handed out again while no Node or Lease changed and no node can have fallen silent since
  private last: { now: number; silentAfter: number; sameUntil: number; fleet: ReturnType<ForecastFeed['fleet']> } | undefined;

  constructor(
    nodes: WatchHandle<SlimNode>,
    private readonly leases: WatchHandle<SlimLease>,
    pods: WatchHandle<SlimPod>,
    private readonly o: FeedOptions,
  ) {
    this.feedPods = new FeedPods(o.namespaces);
    for (const n of nodes.store.values()) this.put(n);
    nodes.subscribe((c) => {
      if (c.type === 'added' || c.type === 'modified') this.put(c.object);
      else if (c.type === 'deleted') this.remove(c.object.name);
    });
    leases.subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified' && c.type !== 'deleted') return;
      const k = this.kept.get(c.object.name);
      if (!k) return;
      this.nodesChanged = true;
      k.node.leaseRenew = c.type === 'deleted' ? undefined : c.object.renewTime;
    });
    for (const [key, p] of pods.store) this.feedPods.change(key, p, undefined);
    pods.subscribe((c) => {
      if (c.type === 'added' || c.type === 'modified') this.feedPods.change(c.key, c.object, c.previous);
      else if (c.type === 'deleted') this.feedPods.change(c.key, undefined, c.object);
      else return;
      this.podsMoved(c.object.nodeName);
      this.podsMoved(c.previous?.nodeName);
    });
  }

  renewOf(name: string): number | undefined {
    return this.kept.get(name)?.node.leaseRenew;
  }

  failing(name: string | undefined, now: number, silentAfter: number, renew?: number): boolean {
    const k = name === undefined ? undefined : this.kept.get(name);
    return k !== undefined && now - silentFrom(k, lastHeartbeatOf(k.node, renew ?? k.node.leaseRenew)) > silentAfter;
  }

  podsOn(name: string): readonly PodGroup[] {
    return this.feedPods.list(name);
  }

  fleet(now: number, silentAfter: number): ReturnType<ForecastFeed['fleet']> {
    const last = this.last;
    if (last && !this.nodesChanged && silentAfter === last.silentAfter && now >= last.now && now <= last.sameUntil) {
      for (const k of this.podsChanged) k.node.pods = this.podsFor(k);
      this.podsChanged.clear();
      return last.fleet;
    }
    this.nodesChanged = false;
    this.podsChanged.clear();
    const { failing, sameUntil } = this.findFailing(now, silentAfter);
    const lastFailing = this.lastFailing;
    if (failing.length !== lastFailing.length || failing.some((k, i) => lastFailing[i] !== k)) this.failingSet++;
    this.lastFailing = failing;
    const healthy = new Map<string, number>();
    for (const z of this.zones.values()) if (z.size > 0) healthy.set(z.name, z.size - z.failing);
    const nodes = failing.map((k) => k.node);
    this.last = { now, silentAfter, sameUntil, fleet: { nodes, healthy, firstSilence: sameUntil + 1, failingSet: this.failingSet } };
    return this.last.fleet;
  }

  /**
   * A pass over every node: the failing ones in name order (their pods and taintedSince filled in, their zones'
   * counts of failing nodes), and the last moment no node not silent yet has fallen silent.
   */
  private findFailing(now: number, silentAfter: number): { failing: Kept[]; sameUntil: number } {
    const failing: Kept[] = [];
    for (const z of this.zones.values()) z.failing = 0;
    // the latest heartbeat + silentAfter of the first to fall silent
    let sameUntil = Infinity;
    for (const k of this.inNameOrder()) {
      const n = k.node;
      const beat = lastHeartbeatOf(n, n.leaseRenew);
      const from = silentFrom(k, beat);
      if (now - from <= silentAfter) {
        sameUntil = Math.min(sameUntil, from + silentAfter);
        continue;
      }
      // failing, but heartbeating yet: silent from then on
      if (beat !== undefined && now - beat <= silentAfter) sameUntil = Math.min(sameUntil, beat + silentAfter);
      if (k.counted) k.counted.failing++;
      n.pods = this.podsFor(k);
      // asked for only where the forecast reads it, on a node with the controller's taint
      n.taintedSince = k.controllerTainted ? this.o.taintedSince(n.name) : undefined;
      failing.push(k);
    }
    return { failing, sameUntil };
  }

  private inNameOrder(): Kept[] {
    return (this.byName ??= [...this.kept.values()].sort((a, b) => byCodeUnit(a.node.name, b.node.name)));
  }

  private podsFor(k: Kept): readonly PodGroup[] | undefined {
    return this.o.podsOf && !this.o.podsOf(k.node.name) ? undefined : groupsOf(k.pods);
  }

  private podsMoved(name: string | undefined): void {
    const k = name === undefined ? undefined : this.kept.get(name);
    if (k) this.podsChanged.add(k);
  }

  private zoneCount(name: string): ZoneCount {
    let z = this.zones.get(name);
    if (!z) this.zones.set(name, (z = { name, size: 0, failing: 0 }));
    return z;
  }

  private put(n: SlimNode): void {
    this.nodesChanged = true;
    const before = this.kept.get(n.name);
    if (before?.counted) before.counted.size--;
    const zone = zoneOf(n.labels);
    const excluded = EXCLUDED in n.labels;
    const counted = excluded ? undefined : this.zoneCount(zone);
    if (counted) counted.size++;
    // every field in one literal: nodes of one shape
    const node: ForecastNode = {
      name: n.name,
      zone,
      excluded,
      created: n.created,
      ready: n.ready,
      leaseRenew: before ? before.node.leaseRenew : this.leases.store.get(`${NODE_LEASE_NAMESPACE}/${n.name}`)?.renewTime,
      taints: n.taints.length ? n.taints : NO_TAINTS,
      pods: undefined,
      taintedSince: undefined,
    };
    const controllerTainted = n.taints.some(isControllerTaint);
    if (before) {
      before.node = node;
      before.sound = isSound(n);
      before.controllerTainted = controllerTainted;
      before.counted = counted;
    } else {
      this.kept.set(n.name, { node, sound: isSound(n), controllerTainted, counted, pods: this.feedPods.hold(n.name) });
      this.byName = undefined;
    }
  }

  private remove(name: string): void {
    const k = this.kept.get(name);
    if (!k) return;
    this.nodesChanged = true;
    if (k.counted) k.counted.size--;
    this.kept.delete(name);
    this.feedPods.release(name);
    this.store.forget(name);
    this.byName = undefined;
  }
}
