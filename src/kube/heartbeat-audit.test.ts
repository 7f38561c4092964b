import { describe, expect, it } from 'vitest';
import { parseKubeVersion, versionDefaults } from './versions.js';
import { type AuditFacts, audit } from './heartbeat-audit.js';

const sources = Object.fromEntries(
  Object.keys(versionDefaults(parseKubeVersion('v1.20.0'))).map((k) => [k, 'defaults']),
) as AuditFacts['sources'];
const nodes = (n: number, zones = 1, leaseDurationSeconds = 40, leaseAgeMs = 3000) =>
  Array.from({ length: n }, (_, i) => ({ name: `node-${i}`, zone: `z${i % zones}`, leaseDurationSeconds, leaseAgeMs }));

function facts(o: Partial<AuditFacts['settings']> = {}, extra: Partial<AuditFacts> = {}): AuditFacts {
  return {
    settings: { ...versionDefaults(parseKubeVersion('v1.20.0')), ...o },
    sources,
    nodes: nodes(3, 2),
    etcd: { walFsyncP99Ms: 2, backendCommitP99Ms: 8 },
    ...extra,
  };
}
const verdicts = (f: AuditFacts) => Object.fromEntries(audit(f).map((c) => [c.id, c.verdict]));

describe('heartbeat audit', () => {
  it('passes the defaults of Kubernetes 1.20 on a healthy two-zone cluster', () => {
    expect(verdicts(facts())).toEqual({
      'heartbeat-grace': 'pass',
      'monitor-period': 'pass',
      'eviction-rate': 'pass',
      'etcd-fsync': 'pass',
      'lease-ages': 'pass',
    });
  });

  it("fails incident 3's configuration: a 10 s grace with leases renewed every 10 s", () => {
    const c = audit(facts({ nodeMonitorGracePeriodMs: 10_000 })).find((x) => x.id === 'heartbeat-grace')!;
    expect(c.verdict).toBe('fail');
    expect(c.detail).toMatch(/^node-monitor-grace-period 10s is 1× the lease renew interval 10s: /);
    expect(verdicts(facts({ nodeMonitorGracePeriodMs: 35_000 }))['heartbeat-grace']).toBe('warn');
  });

  it('judges the renew interval by the slowest lease actually seen on the nodes', () => {
    const f = facts({ nodeMonitorGracePeriodMs: 40_000 }, { nodes: [...nodes(2, 1, 40), ...nodes(1, 1, 60)] });
    expect(audit(f)[0]!.detail).toMatch(/2.7× the lease renew interval 15s/);
    expect(audit(f)[0]!.verdict).toBe('fail');
  });

  it('flags a monitor period too long for the grace', () => {
    expect(verdicts(facts({ nodeMonitorPeriodMs: 40_000 }))['monitor-period']).toBe('fail');
    expect(verdicts(facts({ nodeMonitorPeriodMs: 15_000 }))['monitor-period']).toBe('warn');
  });

  it('explains eviction rates against the cluster size and warns on dangerous ones', () => {
    const big = facts({}, { nodes: nodes(120, 2) });
    expect(audit(big).find((c) => c.id === 'eviction-rate')!.detail).toContain('keeps evicting at 0.01/s');
    expect(audit(facts()).find((c) => c.id === 'eviction-rate')!.detail).toContain('stops evicting (zone ≤ 50 nodes)');
    expect(verdicts(facts({ nodeEvictionRate: 5 }))['eviction-rate']).toBe('warn');
  });

  it('judges etcd disk latency, and says unknown when it cannot be read', () => {
    expect(verdicts(facts({}, { etcd: { walFsyncP99Ms: 30, backendCommitP99Ms: 40 } }))['etcd-fsync']).toBe('warn');
    expect(verdicts(facts({}, { etcd: { walFsyncP99Ms: 1500, backendCommitP99Ms: 3000 } }))['etcd-fsync']).toBe('fail');
    expect(audit(facts({}, { etcd: { error: 'connection refused' } })).find((c) => c.id === 'etcd-fsync')).toEqual({
      id: 'etcd-fsync',
      verdict: 'unknown',
      detail: "cannot read etcd's metrics: connection refused",
    });
  });

  it('notices leases renewed late right now', () => {
    expect(verdicts(facts({}, { nodes: nodes(3, 1, 40, 25_000) }))['lease-ages']).toBe('warn');
    expect(verdicts(facts({}, { nodes: nodes(3, 1, 40, 45_000) }))['lease-ages']).toBe('fail');
  });
});
