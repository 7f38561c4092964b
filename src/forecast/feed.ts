import { type ForecastNode, type PodGroup, isControllerTaint, isSound, latestHeartbeatOrNaN } from './model.js';
import { FeedPods, type NodePods, groupsOf } from './feed-pods.js';
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
   * number that changes whenever the set of failing nodes does.
   */
  fleet(
    now: number,
    silentAfter: number,
  ): { nodes: ForecastNode[]; healthy: Map<string, number>; firstSilence: number; failingSet: number };
  /** The pods on the node named that the forecast judges: not being deleted, and in `namespaces` when given. */
  podsOn(name: string): readonly PodGroup[];
}

const EXCLUDED = 'node.kubernetes.io/exclude-disruption';

/** What a node's flags say (Slots.flags). */
const SOUND = 1;
const EXCLUDED_FROM_ZONES = 2;
const HAS_TAINTS = 4;
const CONTROLLER_TAINT = 8;

/** Every node without taints is given this one empty array: a judgement reads it, not one array per node. */
const NO_TAINTS = Object.freeze([]) as unknown as SlimTaint[];

const orNone = (x: number): number | undefined => (Number.isNaN(x) ? undefined : x);

/** Columns that grow by doubling, and keep what they hold as they do. */
const wider = <T extends Float64Array | Int32Array | Uint8Array>(a: T, capacity: number, make: (n: number) => T): T => {
  const b = make(capacity);
  b.set(a);
  return b;
};

/**
 * What the feed keeps of each node, in columns indexed by a slot the node keeps while it exists: a pass over
 * thousands of nodes reads a few small arrays side by side rather than an object per node scattered through the heap,
 * which is what a judgement's time went to. Times are in ms; NaN stands for none.
 */
class Slots {
  renew = new Float64Array(0);
  heartbeat = new Float64Array(0);
  created = new Float64Array(0);
  flags = new Uint8Array(0);
  /** An index into the feed's zone names. */
  zone = new Int32Array(0);
  readonly names: (string | undefined)[] = [];
  readonly nodes: (SlimNode | undefined)[] = [];
  /** Its pods, held by FeedPods. */
  readonly pods: (NodePods | undefined)[] = [];
  private readonly free: number[] = [];
  private used = 0;

  take(): number {
    const k = this.free.pop();
    if (k !== undefined) return k;
    if (this.used === this.flags.length) this.grow(Math.max(64, 2 * this.used));
    return this.used++;
  }

  release(k: number): void {
    this.names[k] = this.nodes[k] = this.pods[k] = undefined;
    this.flags[k] = 0;
    this.free.push(k);
  }

  private grow(capacity: number): void {
    this.renew = wider(this.renew, capacity, (n) => new Float64Array(n));
    this.heartbeat = wider(this.heartbeat, capacity, (n) => new Float64Array(n));
    this.created = wider(this.created, capacity, (n) => new Float64Array(n));
    this.flags = wider(this.flags, capacity, (n) => new Uint8Array(n));
    this.zone = wider(this.zone, capacity, (n) => new Int32Array(n));
  }
}

export function forecastFeed(
  nodes: WatchHandle<SlimNode>,
  leases: WatchHandle<SlimLease>,
  pods: WatchHandle<SlimPod>,
  o: { namespaces?: ReadonlySet<string>; taintedSince(node: string): number | undefined },
): ForecastFeed {
  const slots = new Slots();
  const slotOf = new Map<string, number>();
  // the nodes' slots by name, worked out again when a node comes or goes
  let byName: Int32Array | undefined;
  // a node came or went since the last fleet(): the same slots may be other nodes
  let byNameChanged = true;
  const zoneIds = new Map<string, number>();
  const zoneNames: string[] = [];
  // per zone, its nodes not excluded from disruption checks
  const zoneSizes: number[] = [];
  // Per node its pods' groups, kept by the pods watch: a pod's key is put in (or taken out of) its group's sorted
  // keys as it comes and goes, so that the first judgement after many nodes fail at once does not group their pods.
  const feedPods = new FeedPods(o.namespaces);

  const counted = (k: number) => (slots.flags[k]! & EXCLUDED_FROM_ZONES) === 0;
  const put = (n: SlimNode) => {
    let k = slotOf.get(n.name);
    if (k === undefined) {
      slotOf.set(n.name, (k = slots.take()));
      slots.names[k] = n.name;
      slots.pods[k] = feedPods.hold(n.name);
      slots.renew[k] = leases.store.get(`${NODE_LEASE_NAMESPACE}/${n.name}`)?.renewTime ?? NaN;
      byName = undefined;
      byNameChanged = true;
    } else if (counted(k)) zoneSizes[slots.zone[k]!]!--;
    const zone = zoneOf(n.labels);
    let z = zoneIds.get(zone);
    if (z === undefined) {
      zoneIds.set(zone, (z = zoneNames.push(zone) - 1));
      zoneSizes.push(0);
    }
    slots.nodes[k] = n;
    slots.zone[k] = z;
    slots.heartbeat[k] = n.ready?.heartbeat ?? NaN;
    slots.created[k] = n.created ?? NaN;
    const controllerTainted = n.taints.some(isControllerTaint);
    slots.flags[k] =
      (isSound(n) ? SOUND : 0) |
      (EXCLUDED in n.labels ? EXCLUDED_FROM_ZONES : 0) |
      (n.taints.length ? HAS_TAINTS : 0) |
      (controllerTainted ? CONTROLLER_TAINT : 0);
    if (counted(k)) zoneSizes[z]!++;
  };
  const remove = (name: string) => {
    const k = slotOf.get(name);
    if (k === undefined) return;
    if (counted(k)) zoneSizes[slots.zone[k]!]!--;
    slotOf.delete(name);
    slots.release(k);
    feedPods.release(name);
    byName = undefined;
    byNameChanged = true;
  };
  for (const n of nodes.store.values()) put(n);
  nodes.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') put(c.object);
    else if (c.type === 'deleted') remove(c.object.name);
  });
  leases.subscribe((c) => {
    if (c.type !== 'added' && c.type !== 'modified' && c.type !== 'deleted') return;
    const k = slotOf.get(c.object.name);
    if (k !== undefined) slots.renew[k] = c.type === 'deleted' ? NaN : (c.object.renewTime ?? NaN);
  });

  for (const [key, p] of pods.store) feedPods.change(key, p, undefined);
  pods.subscribe((c) => {
    if (c.type === 'added' || c.type === 'modified') feedPods.change(c.key, c.object, c.previous);
    else if (c.type === 'deleted') feedPods.change(c.key, undefined, c.object);
  });

  const lastHeartbeat = (k: number, renew: number): number => latestHeartbeatOrNaN(renew, slots.heartbeat[k]!, slots.created[k]!);
  /** isFailing, on a node's columns: failing (-Infinity), or the moment it may fall silent. */
  const silentFrom = (k: number, renew: number): number => {
    const last = lastHeartbeat(k, renew);
    return !(slots.flags[k]! & SOUND) || Number.isNaN(last) ? -Infinity : last;
  };
  // the failing nodes as the last fleet() found them, and the number that changes with them
  let lastFailing: number[] = [];
  let failingSet = 0;
  const inNameOrder = (): Int32Array => (byName ??= Int32Array.from([...slotOf].sort((a, b) => byCodeUnit(a[0], b[0])).map(([, k]) => k)));
  return {
    renewOf: (name) => {
      const k = slotOf.get(name);
      return k === undefined ? undefined : orNone(slots.renew[k]!);
    },
    failing(name, now, silentAfter, renew) {
      const k = name === undefined ? undefined : slotOf.get(name);
      return k !== undefined && now - silentFrom(k, renew ?? slots.renew[k]!) > silentAfter;
    },
    fleet(now, silentAfter) {
      const out: ForecastNode[] = [];
      const slotsOut: number[] = [];
      const failingIn = new Int32Array(zoneNames.length);
      let firstSilence = Infinity;
      for (const k of inNameOrder()) {
        const renew = slots.renew[k]!;
        const last = silentFrom(k, renew);
        if (now - last <= silentAfter) {
          firstSilence = Math.min(firstSilence, last + silentAfter + 1);
          continue;
        }
        // failing, but heartbeating yet: silent from then on
        const beat = lastHeartbeat(k, renew);
        if (now - beat <= silentAfter) firstSilence = Math.min(firstSilence, beat + silentAfter + 1);
        if (counted(k)) failingIn[slots.zone[k]!]!++;
        const flags = slots.flags[k]!;
        const n = slots.nodes[k]!;
        const name = slots.names[k]!;
        // every field in one literal: nodes of one shape; taintedSince asked for only where the forecast reads it,
        // on a node with the controller's taint
        const f: ForecastNode = {
          name,
          zone: zoneNames[slots.zone[k]!]!,
          excluded: (flags & EXCLUDED_FROM_ZONES) !== 0,
          created: orNone(slots.created[k]!),
          ready: n.ready,
          leaseRenew: orNone(renew),
          taints: flags & HAS_TAINTS ? n.taints : NO_TAINTS,
          pods: groupsOf(slots.pods[k]!),
          taintedSince: flags & CONTROLLER_TAINT ? o.taintedSince(name) : undefined,
        };
        out.push(f);
        slotsOut.push(k);
      }
      if (slotsOut.length !== lastFailing.length || slotsOut.some((k, i) => lastFailing[i] !== k) || byNameChanged) failingSet++;
      byNameChanged = false;
      lastFailing = slotsOut;
      const healthy = new Map<string, number>();
      for (let z = 0; z < zoneNames.length; z++) if (zoneSizes[z]! > 0) healthy.set(zoneNames[z]!, zoneSizes[z]! - failingIn[z]!);
      return { nodes: out, healthy, firstSilence, failingSet };
    },
    podsOn: (name) => feedPods.list(name),
  };
}
