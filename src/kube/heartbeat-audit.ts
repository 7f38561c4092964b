import { formatDuration } from '../core/duration.js';
import type { SettingSource } from './controller-settings.js';
import type { LifecycleSettings } from './versions.js';

/**
 * The read-only heartbeat checks of `kube-runbook audit` (incident 3: a grace period equal to the lease renew
 * interval made nodes flap NotReady and lose their pods; slow etcd disks made renewals late). Pure: the CLI
 * gathers the facts, this judges them.
 */
export type Verdict = 'pass' | 'warn' | 'fail' | 'unknown';

export interface AuditCheck {
  id: string;
  verdict: Verdict;
  detail: string;
}

export interface AuditFacts {
  settings: LifecycleSettings;
  sources: Record<keyof LifecycleSettings, SettingSource>;
  nodes: { name: string; zone: string; leaseDurationSeconds?: number; leaseAgeMs?: number }[];
  /** p99 of etcd's disk latencies since it started (ms), or why they could not be read. */
  etcd: { walFsyncP99Ms: number | null; backendCommitP99Ms: number | null } | { error: string };
}

const f = formatDuration;
const times = (x: number) => `${Math.round(x * 10) / 10}×`;

function heartbeatGrace(facts: AuditFacts): AuditCheck {
  const { nodeMonitorGracePeriodMs: grace } = facts.settings;
  const durations = [...new Set(facts.nodes.map((n) => n.leaseDurationSeconds).filter((d): d is number => d !== undefined))].sort(
    (a, b) => b - a,
  );
  // The slowest renewing kubelet is the one that flaps first.
  const renew = (durations.length ? durations[0]! * 1000 : facts.settings.leaseDurationMs) / 4;
  const ratio = grace / renew;
  const what = `node-monitor-grace-period ${f(grace)} is ${times(ratio)} the lease renew interval ${f(renew)}${durations.length ? '' : ' (assumed)'}`;
  if (ratio < 3)
    return {
      id: 'heartbeat-grace',
      verdict: 'fail',
      detail: `${what}: one or two late renewals make a node NotReady and evict its pods; keep grace ≥ 3× (better 4×)`,
    };
  if (ratio < 4) return { id: 'heartbeat-grace', verdict: 'warn', detail: `${what}: meets 3×, but 4× leaves room for a slow etcd write` };
  return { id: 'heartbeat-grace', verdict: 'pass', detail: `${what} (rule: ≥ 3×)` };
}

function monitorPeriod(facts: AuditFacts): AuditCheck {
  const { nodeMonitorPeriodMs: p, nodeMonitorGracePeriodMs: grace } = facts.settings;
  const what = `node-monitor-period ${f(p)} against a grace of ${f(grace)}`;
  if (p >= grace)
    return { id: 'monitor-period', verdict: 'fail', detail: `${what}: the controller looks less often than nodes may be silent` };
  if (p > grace / 4)
    return {
      id: 'monitor-period',
      verdict: 'warn',
      detail: `${what}: NotReady is noticed up to ${f(p)} late; keep it ≤ a quarter of the grace`,
    };
  return { id: 'monitor-period', verdict: 'pass', detail: what };
}

function evictionRates(facts: AuditFacts): AuditCheck {
  const s = facts.settings;
  const zones = new Map<string, number>();
  for (const n of facts.nodes) zones.set(n.zone, (zones.get(n.zone) ?? 0) + 1);
  const largest = Math.max(0, ...zones.values());
  const size = facts.nodes.length;
  const partial =
    largest > s.largeClusterSizeThreshold
      ? `a zone losing ≥ ${Math.round(s.unhealthyZoneThreshold * 100)}% of its nodes keeps evicting at ${s.secondaryNodeEvictionRate}/s`
      : `a zone losing ≥ ${Math.round(s.unhealthyZoneThreshold * 100)}% of its nodes (more than 2) stops evicting (zone ≤ ${s.largeClusterSizeThreshold} nodes)`;
  const drain = s.nodeEvictionRate > 0 ? largest / s.nodeEvictionRate : Infinity;
  const facts_ = `${size} nodes in ${zones.size} zone${zones.size === 1 ? '' : 's'}; node-eviction-rate ${s.nodeEvictionRate}/s taints the largest zone (${largest}) in ${Number.isFinite(drain) ? f(drain * 1000) : 'never'}; ${partial}`;
  const problems: string[] = [];
  if (s.nodeEvictionRate > 1) problems.push('more than one node a second: a network blip empties nodes before anyone can react');
  if (s.secondaryNodeEvictionRate > s.nodeEvictionRate) problems.push('the secondary rate is above the normal one');
  if (s.unhealthyZoneThreshold >= 1 || s.unhealthyZoneThreshold < 0.3)
    problems.push(`unhealthy-zone-threshold ${s.unhealthyZoneThreshold} hardly ever or too easily slows evictions`);
  if (zones.size === 1 && size > 0)
    problems.push('one zone: only losing every node stops evictions (master disruption mode); partial outages evict');
  const serious = problems.filter((p) => !p.startsWith('one zone'));
  return {
    id: 'eviction-rate',
    verdict: serious.length ? 'warn' : 'pass',
    detail: `${facts_}${problems.length ? `; ${problems.join('; ')}` : ''}`,
  };
}

function etcdLatency(facts: AuditFacts): AuditCheck {
  if ('error' in facts.etcd) return { id: 'etcd-fsync', verdict: 'unknown', detail: `cannot read etcd's metrics: ${facts.etcd.error}` };
  const { walFsyncP99Ms: wal, backendCommitP99Ms: commit } = facts.etcd;
  if (wal === null && commit === null) return { id: 'etcd-fsync', verdict: 'unknown', detail: 'etcd has recorded no disk writes yet' };
  const what = `p99 since etcd started: WAL fsync ${wal ?? 'n/a'}ms, backend commit ${commit ?? 'n/a'}ms`;
  if ((wal ?? 0) >= 100 || (commit ?? 0) >= 250)
    return {
      id: 'etcd-fsync',
      verdict: 'fail',
      detail: `${what}: writes this slow make lease renewals late (etcd wants p99 fsync < 10ms, commit < 25ms)`,
    };
  if ((wal ?? 0) >= 10 || (commit ?? 0) >= 25)
    return { id: 'etcd-fsync', verdict: 'warn', detail: `${what}: above etcd's recommended 10ms / 25ms` };
  return { id: 'etcd-fsync', verdict: 'pass', detail: what };
}

function leaseAges(facts: AuditFacts): AuditCheck {
  const aged = facts.nodes.filter((n) => n.leaseAgeMs !== undefined);
  if (!aged.length) return { id: 'lease-ages', verdict: 'unknown', detail: 'no node Lease found in kube-node-lease' };
  const worst = aged.reduce((a, b) => ((b.leaseAgeMs ?? 0) > (a.leaseAgeMs ?? 0) ? b : a));
  const renew = (worst.leaseDurationSeconds ? worst.leaseDurationSeconds * 1000 : facts.settings.leaseDurationMs) / 4;
  const age = worst.leaseAgeMs ?? 0;
  const what = `oldest lease now: ${worst.name}, renewed ${f(age)} ago (renews every ${f(renew)}, NotReady after ${f(facts.settings.nodeMonitorGracePeriodMs)})`;
  if (age > facts.settings.nodeMonitorGracePeriodMs) return { id: 'lease-ages', verdict: 'fail', detail: `${what}: past the grace period` };
  if (age > 2 * renew) return { id: 'lease-ages', verdict: 'warn', detail: `${what}: renewals are late` };
  return { id: 'lease-ages', verdict: 'pass', detail: what };
}

export function audit(facts: AuditFacts): AuditCheck[] {
  return [heartbeatGrace(facts), monitorPeriod(facts), evictionRates(facts), etcdLatency(facts), leaseAges(facts)];
}
