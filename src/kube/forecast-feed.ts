import { type ForecastNode, type PodGroup, isSound, latestHeartbeat } from './forecast.js';
import { NODE_LEASE_NAMESPACE, type SlimLease, type SlimNode, type SlimPod, type SlimToleration, zoneOf } from './resources.js';
import type { WatchHandle } from './watch.js';

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
  /** The failing nodes as the forecast reads them, the others counted per zone, and the first moment one of the others may go silent. */
  fleet(now: number, silentAfter: number): { nodes: ForecastNode[]; healthy: Map<string, number>; firstSilence: number };
  /**
   * The pods on a node that the forecast judges: not being deleted, and in `namespaces` when given. The node by name,
   * or as fleet() gave it (then without a lookup by name: at thousands of failing nodes that lookup was a large part of
   * a judgement).
   */
  podsOn(node: string | ForecastNode): readonly PodGroup[];
}

interface Beat {
  node: SlimNode;
  renew?: number;
  zone: string;
  excluded: boolean;
  /** What a judgement reads of the Node, copied here so that a pass over thousands of nodes touches one object each. */
  sound: boolean;
  heartbeat?: number;
  created?: number;
  /** What the forecast reads, made when the node first fails after a change of its Node object. */
  f?: FedNode;
  /** Its pods' groups (the entry of groupsOn), so that a judgement does not look them up by name. */
  pods?: NodePods;
}

/** A node's pods that count, by tolerations array, and the list of those groups once asked for. */
interface NodePods {
  by: Map<SlimToleration[], PodGroup & { keys: string[] }>;
  list?: PodGroup[];
}

/** A ForecastNode made by the feed, which knows its Beat. */
interface FedNode extends ForecastNode {
  readonly beat: Beat;
}

const EXCLUDED = 'node.kubernetes.io/exclude-disruption';

export function forecastFeed(
  nodes: WatchHandle<SlimNode>,
  leases: WatchHandle<SlimLease>,
  pods: WatchHandle<SlimPod>,
  o: { namespaces?: ReadonlySet<string>; taintedSince(node: string): number | undefined },
): ForecastFeed {
  const beats = new Map<string, Beat>();
  // Per node its pods' groups, kept by the pods watch: a pod's key is put in (or taken out of) its group's sorted
  // keys as it comes and goes, so that the first judgement after many nodes fail at once does not group their pods.
  const groupsOn = new Map<string, NodePods>();
  let zones: Map<string, number> | undefined;
  const put = (n: SlimNode) => {
    const zone = zoneOf(n.labels);
    const excluded = EXCLUDED in n.labels;
    let b = beats.get(n.name);
    if (!b || b.zone !== zone || b.excluded !== excluded) zones = undefined;
    if (!b) beats.set(n.name, (b = { node: n, renew: leases.store.get(`${NODE_LEASE_NAMESPACE}/${n.name}`)?.renewTime, zone, excluded, sound: false, pods: groupsOn.get(n.name) }));
    b.node = n;
    b.zone = zone;
    b.excluded = excluded;
    b.sound = isSound(n);
    b.heartbeat = n.ready?.heartbeat;
    b.created = n.created;
    b.f = undefined;
  };
  for (const n of nodes.store.values()) put(n);
  nodes.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') put(c.object);
    else if (c.type === 'deleted' && beats.delete(c.object.name)) zones = undefined;
  });
  leases.subscribe((c) => {
    if (c.type !== 'added' && c.type !== 'modified' && c.type !== 'deleted') return;
    const b = beats.get(c.object.name);
    if (b) b.renew = c.type === 'deleted' ? undefined : c.object.renewTime;
  });

  const counts = (p: SlimPod | undefined): p is SlimPod & { nodeName: string } =>
    p?.nodeName !== undefined && p.deletionTimestamp === undefined && (!o.namespaces || o.namespaces.has(p.namespace));
  const index = (key: string, p: SlimPod | undefined, before: SlimPod | undefined) => {
    if (counts(before)) {
      const on = groupsOn.get(before.nodeName);
      const g = on?.by.get(before.tolerations);
      if (on && g) {
        const i = sortedIndex(g.keys, key);
        if (g.keys[i] === key) g.keys.splice(i, 1);
        if (g.keys.length === 0) {
          on.by.delete(before.tolerations);
          on.list = undefined;
          if (on.by.size === 0) {
            groupsOn.delete(before.nodeName);
            const b = beats.get(before.nodeName);
            if (b) b.pods = undefined;
          }
        }
      }
    }
    if (counts(p)) {
      let on = groupsOn.get(p.nodeName);
      if (!on) {
        groupsOn.set(p.nodeName, (on = { by: new Map() }));
        const b = beats.get(p.nodeName);
        if (b) b.pods = on;
      }
      const g = on.by.get(p.tolerations);
      if (g) {
        const i = sortedIndex(g.keys, key);
        if (g.keys[i] !== key) g.keys.splice(i, 0, key);
      } else {
        on.by.set(p.tolerations, { node: p.nodeName, tolerations: p.tolerations, keys: [key] });
        on.list = undefined;
      }
    }
  };
  for (const [key, p] of pods.store) index(key, p, undefined);
  pods.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') index(c.key, c.object, c.previous);
    else if (c.type === 'deleted') index(c.key, undefined, c.object);
  });

  const zoneSizes = () => {
    if (!zones) {
      zones = new Map();
      for (const b of beats.values()) if (!b.excluded) zones.set(b.zone, (zones.get(b.zone) ?? 0) + 1);
    }
    return zones;
  };
  const forecastNode = (b: Beat): ForecastNode => {
    const n = b.node;
    b.f ??= { name: n.name, zone: b.zone, excluded: b.excluded, created: n.created, ready: n.ready, taints: n.taints, beat: b };
    b.f.leaseRenew = b.renew;
    b.f.taintedSince = o.taintedSince(n.name);
    return b.f;
  };
  /** isFailing, on a node's copies: failing, or the moment it may fall silent. */
  const silentFrom = (b: Beat, renew: number | undefined): number => {
    const last = latestHeartbeat(renew, b.heartbeat, b.created);
    return !b.sound || last === undefined ? -Infinity : last;
  };
  return {
    renewOf: (name) => beats.get(name)?.renew,
    failing(name, now, silentAfter, renew) {
      const b = name === undefined ? undefined : beats.get(name);
      return b !== undefined && now - silentFrom(b, renew ?? b.renew) > silentAfter;
    },
    fleet(now, silentAfter) {
      const failing: ForecastNode[] = [];
      const failingIn = new Map<string, number>();
      let firstSilence = Infinity;
      for (const b of beats.values()) {
        const last = silentFrom(b, b.renew);
        if (now - last > silentAfter) {
          failing.push(forecastNode(b));
          if (!b.excluded) failingIn.set(b.zone, (failingIn.get(b.zone) ?? 0) + 1);
        } else firstSilence = Math.min(firstSilence, last + silentAfter + 1);
      }
      const healthy = new Map<string, number>();
      for (const [zone, size] of zoneSizes()) healthy.set(zone, size - (failingIn.get(zone) ?? 0));
      return { nodes: failing, healthy, firstSilence };
    },
    podsOn(node) {
      const on = isFed(node) ? node.beat.pods : groupsOn.get(typeof node === 'string' ? node : node.name);
      if (!on) return [];
      return (on.list ??= [...on.by.values()]);
    },
  };
}

const isFed = (node: string | ForecastNode): node is FedNode => typeof node !== 'string' && 'beat' in node;

/** Where `key` is or goes in the sorted `keys` (code-unit order). */
function sortedIndex(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
