import { EXIT, KrError, messageOf } from '../core/errors.js';
import { leasePath, microTime, readLeaseIfAny } from '../kube/lease-api.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';

/** The cluster-wide run lock: one coordination.k8s.io Lease that a run holds while it has anything applied. */
export const RUN_LOCK_NAME = 'kube-runbook-run-lock';

interface Lease {
  metadata: { name: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string };
}

/**
 * Who holds the lock for a run: `running` (its executor renews it), `recovering` (`recover` renews it), `left` (the
 * run ended with something still applied, each with its node-side timer: no process renews it; it lasts until
 * those timers have fired, or `recover` takes it and releases it).
 */
export type RunLockState = 'running' | 'recovering' | 'left';

export interface RunLockHolder {
  runId: string;
  /** Where it runs: user@host pid N. */
  where: string;
  state: RunLockState;
  since: string;
  renewed: string;
  renewedAt: number;
  /** How often its holder renews it (absent when it is left). */
  renewEveryMs?: number;
  expires: string;
}

export interface RunLockOptions {
  namespace: string;
  runId: string;
  where: string;
  /** How long the lock outlives its holder's last renewal (it expires if the holder dies). */
  durationMs: number;
  now: () => number;
  state?: RunLockState;
  /** How often the holder renews it: who reads the lock tells a live holder from a dead one by it. */
  renewEveryMs?: number;
}

const WHERE = 'kube-runbook/where';
const STATE = 'kube-runbook/state';
const EVERY = 'kube-runbook/renew-every-ms';

const annotations = (o: RunLockOptions): Record<string, string> => ({
  [WHERE]: o.where,
  [STATE]: o.state ?? 'running',
  ...(o.renewEveryMs === undefined || o.state === 'left' ? {} : { [EVERY]: String(o.renewEveryMs) }),
});

function api(kube: KubeAccess) {
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot take the run lock', { exit: EXIT.refused });
  return kube.json.bind(kube);
}

const read = (kube: KubeAccess, ns: string) => readLeaseIfAny<Lease>(api(kube), ns, RUN_LOCK_NAME, { timeoutMs: 10_000 });

/** Who holds the lock now, when someone does and the lease has not expired. */
function holderOf(lease: Lease | undefined, now: number): RunLockHolder | undefined {
  const s = lease?.spec;
  if (!s?.holderIdentity || !s.renewTime) return undefined;
  const expires = Date.parse(s.renewTime) + (s.leaseDurationSeconds ?? 0) * 1000;
  if (!(expires > now)) return undefined;
  const a = lease!.metadata.annotations ?? {};
  const state: RunLockState = a[STATE] === 'left' || a[STATE] === 'recovering' ? a[STATE] : 'running';
  const every = Number(a[EVERY]);
  return {
    runId: s.holderIdentity,
    where: a[WHERE] ?? 'unknown',
    state,
    since: s.acquireTime ?? s.renewTime,
    renewed: s.renewTime,
    renewedAt: Date.parse(s.renewTime),
    ...(every > 0 ? { renewEveryMs: every } : {}),
    expires: new Date(expires).toISOString(),
  };
}

export function describeHolder(ns: string, h: RunLockHolder): string {
  const head = `another run holds the cluster-wide run lock (Lease ${ns}/${RUN_LOCK_NAME}): run ${h.runId} (${h.where}) since ${h.since}; `;
  if (h.state === 'left')
    return (
      head +
      'it ended with faults or remediations still applied, each undone by its node-side timer, and holds the lock until then ' +
      `(it expires at ${h.expires}); to clear it now: kube-runbook recover ${h.runId} (undoes them once its rollback.waitFor holds; --force at once)`
    );
  return (
    head +
    `it expires at ${h.expires} unless renewed (its holder renews it while anything is applied); ` +
    `if that process is gone, kube-runbook recover ${h.runId} undoes what it left and releases it`
  );
}

/**
 * Whether the holder's process is alive, by the lock alone: a run or a recover renews it every `renewEveryMs`; one
 * that has missed two renewals and 15 s more is gone (killed, or its machine lost). A lock left by an ended run has
 * no live holder.
 */
export function holderLive(h: RunLockHolder, now: number): boolean {
  if (h.state === 'left') return false;
  const every = h.renewEveryMs ?? 30_000;
  return now - h.renewedAt <= 2 * every + 15_000;
}

/** Read-only: the holder, if any other run holds the lock (for preflight and --dry-run). */
export async function runLockHolder(
  kube: KubeAccess,
  o: Pick<RunLockOptions, 'namespace' | 'runId' | 'now'>,
): Promise<RunLockHolder | undefined> {
  const h = holderOf(await read(kube, o.namespace), o.now());
  return h && h.runId !== o.runId ? h : undefined;
}

/** Read-only: whoever holds the lock now, this run included (for `recover`). */
export async function currentRunLockHolder(
  kube: KubeAccess,
  o: Pick<RunLockOptions, 'namespace' | 'now'>,
): Promise<RunLockHolder | undefined> {
  return holderOf(await read(kube, o.namespace), o.now());
}

/**
 * Takes the lock, or throws RUN_LOCKED (exit 3) naming the run that holds it. A lease whose holder stopped renewing
 * it is taken over; two runs racing for it are told apart by the apiserver (a create or an update on a stale
 * resourceVersion fails with 409 for one of them).
 */
export async function acquireRunLock(kube: KubeAccess, o: RunLockOptions): Promise<void> {
  const json = api(kube);
  const lease = await read(kube, o.namespace);
  const held = holderOf(lease, o.now());
  if (held && held.runId !== o.runId) throw new KrError('RUN_LOCKED', describeHolder(o.namespace, held), { exit: EXIT.refused });
  const now = microTime(o.now());
  const body: Lease = {
    metadata: {
      name: RUN_LOCK_NAME,
      namespace: o.namespace,
      annotations: annotations(o),
      ...(lease ? { resourceVersion: lease.metadata.resourceVersion } : {}),
    },
    spec: {
      holderIdentity: o.runId,
      leaseDurationSeconds: Math.ceil(o.durationMs / 1000),
      acquireTime: held?.since ?? now,
      renewTime: now,
    },
  };
  try {
    if (lease) await json(leasePath(o.namespace, RUN_LOCK_NAME), { method: 'PUT', body, timeoutMs: 10_000 });
    else await json(leasePath(o.namespace), { method: 'POST', body, timeoutMs: 10_000 });
  } catch (e) {
    if (e instanceof ApiStatusError && e.status === 409) {
      const winner = holderOf(await read(kube, o.namespace), o.now());
      throw new KrError(
        'RUN_LOCKED',
        winner ? describeHolder(o.namespace, winner) : 'another run took the cluster-wide run lock at the same moment',
        { exit: EXIT.refused },
      );
    }
    throw new KrError('RUN_LOCK_FAILED', `cannot take the cluster-wide run lock (Lease ${o.namespace}/${RUN_LOCK_NAME}): ${messageOf(e)}`, {
      exit: EXIT.refused,
      cause: e,
    });
  }
}

/**
 * Renews the lock this run holds, with its duration, state and holder as `o` says now; false when another run holds
 * it now (it expired and was taken over) or nobody does (it was released).
 */
export async function renewRunLock(kube: KubeAccess, o: RunLockOptions): Promise<boolean> {
  const lease = await read(kube, o.namespace);
  if (!lease || lease.spec.holderIdentity !== o.runId) return false;
  lease.spec.renewTime = microTime(o.now());
  lease.spec.leaseDurationSeconds = Math.ceil(o.durationMs / 1000);
  lease.metadata.annotations = { ...lease.metadata.annotations, ...annotations(o) };
  if (o.state === 'left') delete lease.metadata.annotations[EVERY];
  await api(kube)(leasePath(o.namespace, RUN_LOCK_NAME), { method: 'PUT', body: lease, timeoutMs: 10_000 });
  return true;
}

/** Releases the lock if this run holds it (by the run at its end, or by `recover` once nothing remains). */
export async function releaseRunLock(kube: KubeAccess, o: Pick<RunLockOptions, 'namespace' | 'runId'>): Promise<boolean> {
  const lease = await read(kube, o.namespace);
  if (!lease || lease.spec.holderIdentity !== o.runId) return false;
  const released: Lease = { metadata: lease.metadata, spec: { leaseDurationSeconds: lease.spec.leaseDurationSeconds } };
  await api(kube)(leasePath(o.namespace, RUN_LOCK_NAME), { method: 'PUT', body: released, timeoutMs: 10_000 });
  return true;
}
