import { RbacAuthorizationV1Api, type KubeConfig, type V1ClusterRole, type V1ClusterRoleBinding } from '@kubernetes/client-node';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError, messageOf } from 'kube-runbook/internal/core/errors.js';
import { PROMETHEUS_USER } from '../host/pki.js';
import { statusOf } from '../sim/api.js';
import { startAndWait } from './control.js';

/** ClusterRole and ClusterRoleBinding that let Prometheus's user read `/metrics`, and nothing else. */
export const METRICS_READER = 'kube-runbook:prometheus';

export function metricsReaderRbac(): { role: V1ClusterRole; binding: V1ClusterRoleBinding } {
  const metadata = { name: METRICS_READER, labels: { 'app.kubernetes.io/managed-by': 'kube-runbook-lab' } };
  return {
    role: { metadata, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] },
    binding: {
      metadata,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: METRICS_READER },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: PROMETHEUS_USER }],
    },
  };
}

/** One scrape target as `/api/v1/targets` describes it. */
interface ActiveTarget {
  labels?: Record<string, string>;
  scrapeUrl?: string;
  health?: string;
  lastError?: string;
}

/** The targets of a `/api/v1/targets` answer that are not up, as `job node (url): last error`; every target's count. */
export function targetsNotUp(answer: unknown): { total: number; notUp: string[] } {
  const targets = ((answer as { data?: { activeTargets?: ActiveTarget[] } } | undefined)?.data?.activeTargets ?? []) as ActiveTarget[];
  const notUp = targets
    .filter((t) => t.health !== 'up')
    .map(
      (t) =>
        `${t.labels?.job ?? '?'} ${t.labels?.node ?? '?'} (${t.scrapeUrl ?? '?'}): ${t.health ?? 'no health'}${t.lastError ? `: ${t.lastError}` : ''}`,
    );
  return { total: targets.length, notUp };
}

/**
 * Grants Prometheus its read of `/metrics`, starts it and waits until it scrapes every target (the proof that its
 * addresses, TLS settings and certificate fit each component). Returns the number of targets.
 */
export async function startPrometheus(o: {
  dir: string;
  url: string;
  admin: KubeConfig;
  clock: Clock;
  signal?: AbortSignal;
  timeoutMs?: number;
}): Promise<number> {
  const rbac = o.admin.makeApiClient(RbacAuthorizationV1Api);
  const { role, binding } = metricsReaderRbac();
  await ignoreExists(() => rbac.createClusterRole({ body: role }));
  await ignoreExists(() => rbac.createClusterRoleBinding({ body: binding }));
  await startAndWait(o.dir, 60_000, o.clock, o.signal);
  const timeoutMs = o.timeoutMs ?? 60_000;
  const deadline = o.clock.now() + timeoutMs;
  let last: { total: number; notUp: string[] } | undefined;
  let error = '';
  for (;;) {
    try {
      const r = await fetch(`${o.url}/api/v1/targets?state=active`, { signal: AbortSignal.timeout(3000) });
      last = targetsNotUp(await r.json());
      if (last.total > 0 && !last.notUp.length) return last.total;
    } catch (e) {
      error = messageOf(e);
    }
    if (o.clock.now() > deadline)
      throw new KrError(
        'LAB_PROMETHEUS_TARGETS',
        `Prometheus (${o.url}) did not scrape every control-plane component within ${timeoutMs / 1000}s`,
        {
          details: last ? (last.total ? last.notUp : ['it has no targets']) : [`its targets could not be read: ${error}`],
        },
      );
    await o.clock.sleep(500, o.signal);
  }
}

async function ignoreExists(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (statusOf(e) !== 409) throw e;
  }
}
