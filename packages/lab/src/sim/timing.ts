/**
 * Heartbeat timing of the kubelet simulator, as pure functions (tested with plain numbers and a fake clock).
 * They follow the kubelet: the lease is renewed every leaseDuration/4 with a small positive jitter, failed
 * renewals are retried with capped exponential back-off, and NodeStatus is posted when it changed or when
 * `nodeStatusReportFrequency` has passed since the last post.
 */

/** The kubelet's NodeLeaseRenewIntervalFraction. */
const RENEW_FRACTION = 0.25;
/** The kubelet's lease controller jitters its period by up to 4 %. */
const RENEW_JITTER = 0.04;

export function renewInterval(leaseDurationMs: number): number {
  return Math.round(leaseDurationMs * RENEW_FRACTION);
}

/** `interval` stretched by up to `factor` (wait.Jitter): never shorter than the interval. `random` is in [0, 1). */
export function jittered(intervalMs: number, random: number, factor = RENEW_JITTER): number {
  return Math.round(intervalMs * (1 + factor * clamp01(random)));
}

/** Delay before the next renewal after a successful one. */
export function nextRenewDelay(leaseDurationMs: number, random: number): number {
  return jittered(renewInterval(leaseDurationMs), random);
}

/**
 * Delay before retrying a failed renewal: 200 ms doubling per failure, capped at the renew interval
 * (so a node retries at least as often as it would renew, and catches up as soon as the apiserver is back).
 */
export function retryDelay(failures: number, leaseDurationMs: number, baseMs = 200): number {
  const cap = renewInterval(leaseDurationMs);
  const d = baseMs * 2 ** Math.max(0, failures - 1);
  return Math.min(cap, Math.max(baseMs, d));
}

/** A lease is expired once `renewTime + leaseDuration` has passed. */
export function leaseExpired(renewTimeMs: number, leaseDurationMs: number, nowMs: number): boolean {
  return nowMs > renewTimeMs + leaseDurationMs;
}

/** Whether NodeStatus must be posted now. */
export function statusDue(o: { lastPostMs: number | undefined; nowMs: number; reportFrequencyMs: number; changed: boolean }): boolean {
  if (o.changed || o.lastPostMs === undefined) return true;
  return o.nowMs - o.lastPostMs >= o.reportFrequencyMs;
}

/**
 * Spreads the first renewal of `count` simulated nodes over one renew interval, so a fleet does not renew in
 * bursts: node i starts at i/count of the interval.
 */
export function firstRenewOffset(index: number, count: number, leaseDurationMs: number): number {
  if (count <= 1) return 0;
  return Math.floor((renewInterval(leaseDurationMs) * (index % count)) / count);
}

/** Back-off of a broken watch or list: 800 ms doubling to 30 s. */
export function watchBackoff(failures: number, baseMs = 800, maxMs = 30_000): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, failures - 1));
}

function clamp01(x: number): number {
  if (!Number.isFinite(x) || x < 0) return 0;
  return x >= 1 ? 0.999999 : x;
}
