import type {
  AllocatedDevice,
  SlimDeviceTaint,
  SlimDeviceTaintRule,
  SlimDeviceToleration,
  SlimResourceClaim,
  SlimResourceSlice,
} from '../kube/dra.js';
import type { Forecast, PodForecast } from './model.js';
import { toleratesTaint } from '../kube/tolerations.js';

/*
 * The second way a pod is evicted (Kubernetes 1.36+, GA in 1.37): the device taint eviction controller of
 * kube-controller-manager (pkg/controller/devicetainteviction, `device-taint-eviction-controller`) deletes the pods
 * an allocated ResourceClaim is reserved for when one of its devices has a NoExecute taint, from its ResourceSlice
 * or from a DeviceTaintRule, that the claim does not tolerate forever. It has no zones, no rate limit and no memory
 * of when it first saw a taint: a pod goes at the taint's timeAdded + the smallest tolerationSeconds among the
 * claim's NoExecute tolerations of it (claimEvictionTime), at once when none tolerates it, so a new leader
 * evicts at the same moment as the old one would have. Turning off `taint-eviction-controller` does not stop it.
 */

export interface DeviceTaintInput {
  now: number;
  claims: Iterable<SlimResourceClaim>;
  slices: Iterable<SlimResourceSlice>;
  rules: Iterable<SlimDeviceTaintRule>;
  /** The node a reserved pod is bound to (by namespace, name and uid); undefined when it is gone, not bound, or not counted. */
  nodeOf(namespace: string, name: string, uid: string): string | undefined;
}

/** When and why the pods of allocated claims are evicted for device taints, soonest first. */
export function deviceTaintEvictions(input: DeviceTaintInput): PodForecast[] {
  const sliceTaints = new Map<string, { taints: SlimDeviceTaint[]; slice: string }>();
  for (const s of input.slices)
    for (const d of s.devices) {
      const noExecute = d.taints.filter((t) => t.effect === 'NoExecute');
      if (noExecute.length) sliceTaints.set(deviceId(s.driver, s.pool, d.name), { taints: noExecute, slice: s.name });
    }
  const rules = [...input.rules].filter((r) => r.selects && r.taint.effect === 'NoExecute');
  const byPod = new Map<string, PodForecast>();
  for (const claim of input.claims) {
    const e = claimEvictionTime(claim.allocated, sliceTaints, rules, input.now);
    if (!e) continue;
    for (const p of claim.reservedFor) {
      const node = input.nodeOf(claim.namespace, p.name, p.uid);
      if (node === undefined) continue;
      const key = `${claim.namespace}/${p.name}`;
      const had = byPod.get(key);
      if (!had || e.at < had.evictAt!) byPod.set(key, { key, node, evictAt: e.at, evictLikely: e.at, why: e.why });
    }
  }
  return [...byPod.values()].sort((a, b) => a.evictAt! - b.evictAt! || (a.key < b.key ? -1 : 1));
}

/** The earliest eviction among a claim's devices' NoExecute taints, with the taint that sets it; undefined: none. */
function claimEvictionTime(
  allocated: readonly AllocatedDevice[],
  sliceTaints: ReadonlyMap<string, { taints: SlimDeviceTaint[]; slice: string }>,
  rules: readonly SlimDeviceTaintRule[],
  now: number,
): { at: number; why: string } | undefined {
  let best: { at: number; why: string } | undefined;
  for (const d of allocated) {
    const on = `${d.driver}/${d.pool}/${d.device}`;
    const fromSlice = sliceTaints.get(deviceId(d.driver, d.pool, d.device));
    const taints = [
      ...(fromSlice?.taints ?? []).map((taint) => ({ taint, source: `device taint ${taint.key} of ResourceSlice ${fromSlice!.slice}` })),
      ...rules.filter((r) => ruleMatchesDevice(r, d)).map((r) => ({ taint: r.taint, source: `device taint ${r.name}` })),
    ];
    for (const { taint, source } of taints) {
      const tol = toleratedMs(d.tolerations, taint);
      if (tol === Infinity) continue;
      // the apiserver sets timeAdded; were it missing, the earliest moment is now
      const at = (taint.timeAdded ?? now) + tol;
      if (!best || at < best.at) best = { at, why: `${source} on ${on}` };
    }
  }
  return best;
}

/** A selector's fields that are set must all match (ruleMatchesDevice). */
function ruleMatchesDevice(r: SlimDeviceTaintRule, d: AllocatedDevice): boolean {
  return (
    (r.driver === undefined || r.driver === d.driver) &&
    (r.pool === undefined || r.pool === d.pool) &&
    (r.device === undefined || r.device === d.device)
  );
}

/**
 * How long a claim's tolerations let its pods stay with this NoExecute taint, in ms: Infinity when a matching
 * toleration has no tolerationSeconds, else the smallest of them (negative counts as 0), 0 when none matches. Only
 * tolerations whose effect is NoExecute count (claimEvictionTime checks the effect before ToleratesTaint); they match
 * as a pod's do (toleratesTaint), `Lt` and `Gt` never.
 */
export function toleratedMs(tolerations: readonly SlimDeviceToleration[], taint: SlimDeviceTaint): number {
  let min: number | undefined;
  for (const t of tolerations) {
    if (t.effect !== 'NoExecute' || !toleratesTaint(t, taint)) continue;
    if (t.seconds === undefined) return Infinity;
    min = Math.min(min ?? Infinity, Math.max(t.seconds, 0) * 1000);
  }
  return min ?? 0;
}

const deviceId = (driver: string, pool: string, device: string) => `${driver}\u0000${pool}\u0000${device}`;

/**
 * The forecast with the device taint evictions merged in: they are counted at risk, listed among its pods (the first
 * `podsKept` by time), and set the earliest eviction when sooner. `frozen`: kube-controller-manager does not run
 * (stopped, or no leader), which stops them too; turning off taint eviction alone does not.
 */
export function withDeviceEvictions(f: Forecast, evictions: readonly PodForecast[], frozen: boolean, podsKept = 20): Forecast {
  if (evictions.length === 0 || frozen) return f;
  const first = evictions[0]!;
  const earliest =
    f.earliest && f.earliest.at <= first.evictAt!
      ? f.earliest
      : { at: first.evictAt!, pod: first.key, node: first.node, likely: first.evictAt!, cause: first.why };
  const pods = [...f.pods, ...evictions].sort((a, b) => (a.evictAt ?? Infinity) - (b.evictAt ?? Infinity)).slice(0, podsKept);
  // a failing node the forecast lists is counted there already when it is at risk
  const listed = new Set(f.nodes.map((n) => n.name));
  const nodes = new Set(evictions.map((e) => e.node).filter((n) => !listed.has(n)));
  return { ...f, earliest, pods, atRisk: f.atRisk + evictions.length, nodesAtRisk: f.nodesAtRisk + nodes.size };
}
