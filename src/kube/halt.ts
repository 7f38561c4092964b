import type { Clock } from '../core/clock.js';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import { type FailedAttempt, retrying } from '../core/retry.js';
import { HALT_NAME } from '../nodes/agent-halt.js';
import { leasePath, microTime, readLeaseIfAny } from './lease-api.js';
import { kubeTransient } from './transient.js';
import type { KubeAccess } from './types.js';

/**
 * The halt: a coordination.k8s.io Lease, `kube-runbook-halt`. The cluster's, in kube-system, stops every run of the
 * cluster whatever its lock namespace; one in a run lock's own namespace (spec.safety.lockNamespace) stops only the runs
 * locked there. While its holder is set, the runs it stops roll back at once and none of them starts; node agents fire
 * their faults' dead-men. `resume` clears the holder and records who resumed and when; the object stays, with that record.
 */
export { HALT_NAME };
/** Where the cluster's halt lives: the one every run follows, and `halt` and `resume` write without `-n`. */
export const HALT_NAMESPACE = 'kube-system';

/** The halts that stop a run locked in `lockNamespace`: the cluster's, and its lock namespace's own when that differs. */
export const haltNamespaces = (lockNamespace: string): string[] =>
  lockNamespace === HALT_NAMESPACE ? [HALT_NAMESPACE] : [HALT_NAMESPACE, lockNamespace];

/** What `halt` and `resume` need to act on the halt of `namespace`: nothing for the cluster's, else `-n NAMESPACE`. */
export const haltFlag = (namespace: string): string => (namespace === HALT_NAMESPACE ? '' : ` -n ${namespace}`);

/** "Lease kube-system/kube-runbook-halt", or "Leases kube-system/kube-runbook-halt, ns/kube-runbook-halt". */
export const haltLeases = (namespaces: string[]): string =>
  `Lease${namespaces.length > 1 ? 's' : ''} ${namespaces.map((ns) => `${ns}/${HALT_NAME}`).join(', ')}`;

const REASON = 'kube-runbook/halt-reason';
const RESUMED_BY = 'kube-runbook/resumed-by';
const RESUMED_AT = 'kube-runbook/resumed-at';

interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: { holderIdentity?: string; acquireTime?: string };
}

/** The halt as it is set: who set it, why and when (ISO). */
export interface Halt {
  by: string;
  reason: string;
  since: string;
}

/** The halt object as read: set (`halt`), or clear with who cleared it last and when (if anyone did). */
export interface HaltState {
  namespace: string;
  halt?: Halt;
  resumedBy?: string;
  resumedAt?: string;
}

function api(kube: KubeAccess) {
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot read the halt', { exit: EXIT.refused });
  return kube.json.bind(kube);
}

const readLease = (kube: KubeAccess, ns: string, o: { timeoutMs?: number; signal?: AbortSignal }) =>
  readLeaseIfAny<Lease>(api(kube), ns, HALT_NAME, { timeoutMs: o.timeoutMs ?? 5_000, signal: o.signal });

/** The halt object's state; only whether a holder is set counts (the rest is shown, never acted on). */
function haltOf(lease: Lease | undefined, namespace: string): HaltState {
  const a = lease?.metadata.annotations ?? {};
  const by = lease?.spec.holderIdentity;
  const resumed = { ...(a[RESUMED_BY] ? { resumedBy: a[RESUMED_BY] } : {}), ...(a[RESUMED_AT] ? { resumedAt: a[RESUMED_AT] } : {}) };
  if (!by) return { namespace, ...resumed };
  return { namespace, halt: { by, reason: a[REASON] ?? '', since: lease.spec.acquireTime ?? '' }, ...resumed };
}

/** Reads the halt once (one request, bounded by `timeoutMs`); throws when the apiserver does not answer. */
export async function readHalt(
  kube: KubeAccess,
  o: { namespace?: string; timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<HaltState> {
  const ns = o.namespace ?? HALT_NAMESPACE;
  return haltOf(await readLease(kube, ns, o), ns);
}

/**
 * The halts that stop a run locked in `lockNamespace`, read at once (one request each, bounded by `timeoutMs`); throws
 * when any does not answer (a halt that cannot be read is never taken as none).
 */
export function readHalts(
  kube: KubeAccess,
  lockNamespace: string,
  o: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<HaltState[]> {
  return Promise.all(haltNamespaces(lockNamespace).map((namespace) => readHalt(kube, { ...o, namespace })));
}

/** "halted by alice@host since 2026-…: the payment outage" */
export function describeHalt(ns: string, h: Halt): string {
  return `halted by ${h.by} since ${h.since} (Lease ${ns}/${HALT_NAME})${h.reason ? `: ${h.reason}` : ''}`;
}

export interface HaltWriteOptions {
  namespace?: string;
  /** Who sets or clears it, as recorded (user@host, or a name given). */
  by: string;
  clock: Clock;
  signal?: AbortSignal;
  /** How long the write is tried through transient failures (30 s by default). */
  withinMs?: number;
  /** Each failed attempt, as it happens. */
  onFailure?: (f: FailedAttempt) => void;
}

/** What a write did: the state after it, and whether it was so already (a second halt keeps the first one's record). */
export interface HaltWrite {
  state: HaltState;
  already: boolean;
}

/**
 * Sets the halt (who, why, now), tried again through transient failures and conflicts for `withinMs`; throws
 * HALT_NOT_WRITTEN (exit 1) when it could not be written. A halt already set is kept as it is (`already`).
 */
export function setHalt(kube: KubeAccess, o: HaltWriteOptions & { reason: string }): Promise<HaltWrite> {
  return write(kube, o, 'halt', (lease, now) => {
    if (lease?.spec.holderIdentity) return undefined;
    const annotations = { ...lease?.metadata.annotations, [REASON]: o.reason };
    return { ...lease?.spec, holderIdentity: o.by, acquireTime: now, annotations };
  });
}

/** Clears the halt, recording who cleared it and when; a halt not set is left as it is (`already`). */
export function clearHalt(kube: KubeAccess, o: HaltWriteOptions): Promise<HaltWrite> {
  return write(kube, o, 'resume', (lease, now) => {
    if (!lease?.spec.holderIdentity) return undefined;
    const annotations = { ...lease.metadata.annotations, [RESUMED_BY]: o.by, [RESUMED_AT]: now };
    return { annotations };
  });
}

type Change = { holderIdentity?: string; acquireTime?: string; annotations: Record<string, string> };

async function write(
  kube: KubeAccess,
  o: HaltWriteOptions,
  what: 'halt' | 'resume',
  change: (lease: Lease | undefined, now: string) => Change | undefined,
): Promise<HaltWrite> {
  const ns = o.namespace ?? HALT_NAMESPACE;
  const json = api(kube);
  const once = async (): Promise<HaltWrite> => {
    const lease = await readLease(kube, ns, { signal: o.signal });
    const c = change(lease, microTime(o.clock.now()));
    if (!c) return { state: haltOf(lease, ns), already: true };
    const { annotations, ...spec } = c;
    const body: Lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: HALT_NAME,
        namespace: ns,
        annotations,
        ...(lease ? { resourceVersion: lease.metadata.resourceVersion } : {}),
      },
      spec,
    };
    const written = lease
      ? await json<Lease>(leasePath(ns, HALT_NAME), { method: 'PUT', body, timeoutMs: 10_000, signal: o.signal })
      : await json<Lease>(leasePath(ns), { method: 'POST', body, timeoutMs: 10_000, signal: o.signal });
    return { state: haltOf(written ?? body, ns), already: false };
  };
  try {
    return await retrying(once, {
      clock: o.clock,
      signal: o.signal,
      deadline: o.clock.now() + (o.withinMs ?? 30_000),
      // a conflict (someone wrote it meanwhile) is read again and decided anew
      classify: (e) => kubeTransient(e, { safeToRepeat: true, idempotentWrite: true }),
      onFailure: o.onFailure,
    });
  } catch (e) {
    throw new KrError(
      'HALT_NOT_WRITTEN',
      `the ${what} was not written (Lease ${ns}/${HALT_NAME}): ${messageOf(e)}${what === 'halt' ? '; kube-runbook halt --local stops the runs of this machine' : ''}`,
      { exit: EXIT.failed, cause: e },
    );
  }
}
