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

export function forecastFeed(
  nodes: WatchHandle<SlimNode>,
  leases: WatchHandle<SlimLease>,
  pods: WatchHandle<SlimPod>,
  o: {
    namespaces?: ReadonlySet<string>;
    /** Whether the pods on the node named are judged (all when not given). */
    podsOf?: (node: string) => boolean;
    taintedSince(node: string): number | undefined;
  },
): ForecastFeed {
  const kept = new Map<string, Kept>();
  // the nodes by name, worked out again when a node comes or goes
  let byName: Kept[] | undefined;
  const zones = new Map<string, ZoneCount>();
  // Per node its pods' groups, kept by the pods watch: a pod's key is put in (or taken out of) its group's sorted
  // keys as it comes and goes, so that the first judgement after many nodes fail at once does not group their pods.
  const feedPods = new FeedPods(o.namespaces);
  const store = new ForecastStore();
  // What changed since the last fleet(): a Node or a Lease (the failing nodes are found again in a pass over every
  // node), or only the pods of some nodes (their groups are handed out again, nothing else).
  let nodesChanged = true;
  const podsChanged = new Set<Kept>();

  const zoneCount = (name: string): ZoneCount => {
    let z = zones.get(name);
    if (!z) zones.set(name, (z = { name, size: 0, failing: 0 }));
    return z;
  };
  const put = (n: SlimNode) => {
    nodesChanged = true;
    const before = kept.get(n.name);
    if (before?.counted) before.counted.size--;
    const zone = zoneOf(n.labels);
    const excluded = EXCLUDED in n.labels;
    const counted = excluded ? undefined : zoneCount(zone);
    if (counted) counted.size++;
    // every field in one literal: nodes of one shape
    const node: ForecastNode = {
      name: n.name,
      zone,
      excluded,
      created: n.created,
      ready: n.ready,
      leaseRenew: before ? before.node.leaseRenew : leases.store.get(`${NODE_LEASE_NAMESPACE}/${n.name}`)?.renewTime,
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
      kept.set(n.name, { node, sound: isSound(n), controllerTainted, counted, pods: feedPods.hold(n.name) });
      byName = undefined;
    }
  };
  const remove = (name: string) => {
    const k = kept.get(name);
    if (!k) return;
    nodesChanged = true;
    if (k.counted) k.counted.size--;
    kept.delete(name);
    feedPods.release(name);
    store.forget(name);
    byName = undefined;
  };
  for (const n of nodes.store.values()) put(n);
  nodes.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') put(c.object);
    else if (c.type === 'deleted') remove(c.object.name);
  });
  leases.subscribe((c) => {
    if (c.type !== 'added' && c.type !== 'modified' && c.type !== 'deleted') return;
    const k = kept.get(c.object.name);
    if (!k) return;
    nodesChanged = true;
    k.node.leaseRenew = c.type === 'deleted' ? undefined : c.object.renewTime;
  });

  for (const [key, p] of pods.store) feedPods.change(key, p, undefined);
  const podsMoved = (name: string | undefined) => {
    const k = name === undefined ? undefined : kept.get(name);
    if (k) podsChanged.add(k);
  };
  pods.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') feedPods.change(c.key, c.object, c.previous);
    else if (c.type === 'deleted') feedPods.change(c.key, undefined, c.object);
    else return;
    podsMoved(c.object.nodeName);
    podsMoved(c.previous?.nodeName);
  });
  const podsFor = (k: Kept) => (o.podsOf && !o.podsOf(k.node.name) ? undefined : groupsOf(k.pods));

  /** isFailing, on a node kept and its last heartbeat: failing (-Infinity), or the moment it may fall silent. */
  const silentFrom = (k: Kept, beat: number | undefined): number => (!k.sound || beat === undefined ? -Infinity : beat);
  // the failing nodes as the last fleet() found them, and the number that changes with them
  let lastFailing: Kept[] = [];
  let failingSet = 0;
  // the last fleet(), handed out again while no Node or Lease changed and no node can have fallen silent since
  let last: { now: number; silentAfter: number; sameUntil: number; fleet: ReturnType<ForecastFeed['fleet']> } | undefined;
  const inNameOrder = (): Kept[] => (byName ??= [...kept.values()].sort((a, b) => byCodeUnit(a.node.name, b.node.name)));
  return {
    renewOf: (name) => kept.get(name)?.node.leaseRenew,
    failing(name, now, silentAfter, renew) {
      const k = name === undefined ? undefined : kept.get(name);
      return k !== undefined && now - silentFrom(k, lastHeartbeatOf(k.node, renew ?? k.node.leaseRenew)) > silentAfter;
    },
    fleet(now, silentAfter) {
      if (last && !nodesChanged && silentAfter === last.silentAfter && now >= last.now && now <= last.sameUntil) {
        for (const k of podsChanged) k.node.pods = podsFor(k);
        podsChanged.clear();
        return last.fleet;
      }
      nodesChanged = false;
      podsChanged.clear();
      const failing: Kept[] = [];
      const out: ForecastNode[] = [];
      for (const z of zones.values()) z.failing = 0;
      // the last moment no node not silent yet has fallen silent: the latest heartbeat + silentAfter of the first
      let sameUntil = Infinity;
      for (const k of inNameOrder()) {
        const n = k.node;
        const beat = lastHeartbeatOf(n, n.leaseRenew);
        const last = silentFrom(k, beat);
        if (now - last <= silentAfter) {
          sameUntil = Math.min(sameUntil, last + silentAfter);
          continue;
        }
        // failing, but heartbeating yet: silent from then on
        if (beat !== undefined && now - beat <= silentAfter) sameUntil = Math.min(sameUntil, beat + silentAfter);
        if (k.counted) k.counted.failing++;
        n.pods = podsFor(k);
        // asked for only where the forecast reads it, on a node with the controller's taint
        n.taintedSince = k.controllerTainted ? o.taintedSince(n.name) : undefined;
        failing.push(k);
        out.push(n);
      }
      if (failing.length !== lastFailing.length || failing.some((k, i) => lastFailing[i] !== k)) failingSet++;
      lastFailing = failing;
      const healthy = new Map<string, number>();
      for (const z of zones.values()) if (z.size > 0) healthy.set(z.name, z.size - z.failing);
      last = { now, silentAfter, sameUntil, fleet: { nodes: out, healthy, firstSilence: sameUntil + 1, failingSet } };
      return last.fleet;
    },
    podsOn: (name) => feedPods.list(name),
    store,
  };
}
