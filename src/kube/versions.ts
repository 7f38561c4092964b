/**
 * Everything that differs between the Kubernetes versions kube-runbook supports, keyed by the server's
 * `/version`. Each fact names the release it changed in; `docs/kubernetes-versions.md` lists what the lab's
 * real controllers did on each version.
 */
export interface KubeVersion {
  major: number;
  minor: number;
  patch: number;
  /** As the server says it, e.g. `v1.37.2`. */
  gitVersion: string;
}

/** `v1.37.2`, `1.20.2`, `v1.34.0-rc.1+abc` → the version; undefined for anything else. */
export function parseKubeVersion(text: string | undefined): KubeVersion | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(text?.trim() ?? '');
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), gitVersion: text!.trim() };
}

/** The controller that deletes the pods of a node with a NoExecute taint. */
export type TaintEvictor = 'node-lifecycle-controller' | 'taint-eviction-controller';

export interface VersionTraits {
  version: KubeVersion | undefined;
  /**
   * Since 1.29 (KEP-3902) taint-based eviction runs in its own `taint-eviction-controller` inside the
   * controller-manager; before, the node lifecycle controller's taint manager did it.
   */
  taintEvictor: TaintEvictor;
  /** `--controllers=*,-taint-eviction-controller` stops evictions alone (1.29+), everything else keeps running. */
  canDisableTaintEviction: boolean;
  /**
   * Pods deleted by the taint manager get a `DisruptionTarget` condition with reason `DeletionByTaintManager`
   * (PodDisruptionConditions: on by default since 1.26, GA in 1.31). On such servers a deletion without that
   * condition is not a taint eviction; on older ones the cause can only be inferred from timing.
   */
  writesDisruptionTarget: boolean;
  /** The controller-manager's `--pod-eviction-timeout` was removed in 1.27 (unused since taint-based eviction). */
  hasPodEvictionTimeoutFlag: boolean;
  /**
   * A node marked Unknown is queued for its NoExecute taint in the same monitor pass (kubernetes#120816; seen on
   * the lab's 1.34 and 1.37, tainted ~70 ms after NotReady), not one pass later (seen on 1.20, where the
   * controller read back the Ready condition it wrote). Only 1.20 is known to wait: every other version is taken
   * to taint at once, which can only make a forecast early, never late.
   */
  taintsInTheSamePass: boolean;
  /**
   * Every monitor pass removes each untainted NotReady node from its zone's taint queue and adds it again
   * (markNodeForTainting: `Remove` then `Add`), in the order the pass's parallel workers reach the nodes, so the queue
   * is not first in, first out (read in the source of 1.34 and 1.37; seen at 180 nodes). 1.20's `SetRemove` leaves the
   * first entry in the heap, which keeps each node first in, first out. Releases between are taken to re-queue: that
   * changes only the likely moment the forecast gives, not its bound.
   */
  requeuesEveryPass: boolean;
  /**
   * The apiserver knows watch-list's `sendInitialEvents` (1.27+; the WatchList feature is on by default on the
   * lab's 1.34 and 1.37, which stream a list's objects as a watch's initial events). A server that knows the
   * parameter with the feature off refuses the watch; older ones would ignore it, so they are not asked.
   */
  knowsSendInitialEvents: boolean;
  /**
   * The device taint eviction controller (`device-taint-eviction-controller`, KEP-5055) runs by default: it deletes
   * the pods of allocated ResourceClaims whose devices carry a NoExecute taint, with the DisruptionTarget reason
   * `DeletionByDeviceTaintManager` (feature gate DRADeviceTaints: alpha and off in 1.33–1.35, beta and on in 1.36, GA
   * in 1.37). `--controllers=*,-taint-eviction-controller` leaves it running.
   */
  evictsForDeviceTaints: boolean;
  /** DeviceTaintRules are served in resource.k8s.io/v1 by default (DRADeviceTaintRules: GA and on in 1.37, beta and off in 1.36). */
  servesDeviceTaintRules: boolean;
}

/**
 * `atLeast(v, 29)`: 1.29 or newer. An unknown version counts as old, the safe side of every trait: the shorter
 * grace period (forecasts early, never late), timing inference of deletion causes, no taint-eviction switch.
 */
export const atLeast = (v: KubeVersion | undefined, minor: number): boolean => v !== undefined && (v.major > 1 || v.minor >= minor);

export function traitsOf(version: KubeVersion | undefined): VersionTraits {
  return {
    version,
    taintEvictor: atLeast(version, 29) ? 'taint-eviction-controller' : 'node-lifecycle-controller',
    canDisableTaintEviction: atLeast(version, 29),
    writesDisruptionTarget: atLeast(version, 26),
    hasPodEvictionTimeoutFlag: !atLeast(version, 27),
    taintsInTheSamePass: atLeast(version, 21) || version === undefined,
    requeuesEveryPass: atLeast(version, 21) || version === undefined,
    knowsSendInitialEvents: atLeast(version, 27),
    evictsForDeviceTaints: atLeast(version, 36),
    servesDeviceTaintRules: atLeast(version, 37),
  };
}

/** The node lifecycle controller's settings and the kubelet's lease, as the eviction forecast reads them. */
export interface LifecycleSettings {
  nodeMonitorGracePeriodMs: number;
  nodeMonitorPeriodMs: number;
  nodeStartupGracePeriodMs: number;
  /** Nodes per second tainted in a healthy (or fully disrupted) zone. */
  nodeEvictionRate: number;
  /** Nodes per second in a partially disrupted zone larger than largeClusterSizeThreshold; 0 otherwise. */
  secondaryNodeEvictionRate: number;
  unhealthyZoneThreshold: number;
  largeClusterSizeThreshold: number;
  /** The kubelet's lease duration; it renews every quarter of it. */
  leaseDurationMs: number;
}

/**
 * Defaults of kube-controller-manager and the kubelet: `--node-monitor-grace-period` is 50 s since 1.32 (40 s
 * before); the rest has not changed since 1.20. An unknown version gets 40 s: a forecast is then early, never late.
 */
export function versionDefaults(version: KubeVersion | undefined): LifecycleSettings {
  return {
    nodeMonitorGracePeriodMs: atLeast(version, 32) ? 50_000 : 40_000,
    nodeMonitorPeriodMs: 5_000,
    nodeStartupGracePeriodMs: 60_000,
    nodeEvictionRate: 0.1,
    secondaryNodeEvictionRate: 0.01,
    unhealthyZoneThreshold: 0.55,
    largeClusterSizeThreshold: 50,
    leaseDurationMs: 40_000,
  };
}

const known = new WeakMap<object, Promise<KubeVersion | undefined>>();

/**
 * The server's version from `/version`, asked once per cluster access (a failed answer is asked again next time);
 * undefined when it cannot be read.
 */
export function serverVersion(kube: {
  raw(path: string, o?: { timeoutMs?: number }): Promise<{ status: number; body: string }>;
}): Promise<KubeVersion | undefined> {
  let p = known.get(kube);
  if (!p) {
    p = kube
      .raw('/version', { timeoutMs: 5000 })
      .then((r) => (r.status === 200 ? parseKubeVersion((JSON.parse(r.body) as { gitVersion?: string }).gitVersion) : undefined))
      .catch(() => undefined);
    known.set(kube, p);
    void p.then((v) => v === undefined && known.delete(kube));
  }
  return p;
}
