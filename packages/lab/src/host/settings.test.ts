import { describe, expect, it } from 'vitest';
import { isKrError } from 'kube-runbook/internal/core/errors.js';
import { controlPlaneNodes, goDuration, resolveSettings, zoneOf } from './settings.js';

describe('lab settings', () => {
  it('defaults to compressed timings: grace 8s, monitor 1s, renew 2s, toleration 30s', () => {
    const s = resolveSettings({});
    expect(s).toMatchObject({
      nodes: 3,
      zones: 1,
      nodeMonitorGracePeriod: 8000,
      nodeMonitorPeriod: 1000,
      leaseRenewInterval: 2000,
      leaseDuration: 8000,
      defaultTolerationSeconds: 30,
      nodeEvictionRate: 0.1,
      secondaryNodeEvictionRate: 0.01,
      unhealthyZoneThreshold: 0.55,
      largeClusterSizeThreshold: 50,
      workload: true,
      replicas: 6,
    });
  });

  it('takes real nodes beside simulated ones: none by default, two replicas per node of either kind', () => {
    expect(resolveSettings({}).realNodes).toBeUndefined();
    expect(resolveSettings({ nodes: 1, realNodes: 2 })).toMatchObject({ nodes: 1, realNodes: 2, replicas: 6, workload: true });
    expect(resolveSettings({ nodes: 0, realNodes: 1 })).toMatchObject({ workload: true, replicas: 2 });
    for (const bad of [-1, 40, 1.5]) {
      try {
        resolveSettings({ realNodes: bad });
        expect.unreachable();
      } catch (e) {
        expect(isKrError(e) && e.exit).toBe(2);
        expect((e as Error).message).toMatch(/--real-nodes must be a whole number from 0 to 39/);
      }
    }
  });

  it('takes up to 3 nodes whose PID 1 is systemd, only with --kubeadm, each counted for the replicas', () => {
    expect(resolveSettings({ nodes: 0, realNodes: 1, kubeadm: true }).systemdNodes).toBeUndefined();
    expect(resolveSettings({ nodes: 0, realNodes: 1, kubeadm: true, systemdNodes: 2 })).toMatchObject({ systemdNodes: 2, replicas: 6 });
    const refused = (o: Parameters<typeof resolveSettings>[0]) => {
      try {
        resolveSettings(o);
        return expect.unreachable();
      } catch (e) {
        expect(isKrError(e) && e.exit).toBe(2);
        return (e as Error).message;
      }
    };
    expect(refused({ nodes: 0, realNodes: 1, kubeadm: true, systemdNodes: 4 })).toMatch(
      /--systemd-nodes must be a whole number from 0 to 3/,
    );
    expect(refused({ nodes: 0, realNodes: 1, systemdNodes: 1 })).toMatch(/--systemd-nodes must be given with --kubeadm/);
  });

  it('takes durations as text or milliseconds', () => {
    const s = resolveSettings({ grace: '40s', leaseRenew: 10_000, toleration: '5m', monitorPeriod: '500ms' });
    expect(s).toMatchObject({
      nodeMonitorGracePeriod: 40_000,
      leaseDuration: 40_000,
      defaultTolerationSeconds: 300,
      nodeMonitorPeriod: 500,
    });
  });

  it.each([
    [{ nodes: -1 }, '--nodes'],
    [{ nodes: 2.5 }, '--nodes'],
    [{ grace: '8' }, '--grace'],
    [{ toleration: 30 }, '--toleration'],
    [{ unhealthyZoneThreshold: 1.5 }, '--unhealthy-zone-threshold'],
    [{ evictionRate: -0.1 }, '--eviction-rate'],
    [{ controlPlanes: 2 }, '--control-planes'],
    [{ controlPlanes: 0 }, '--control-planes'],
    [{ prometheus: 'yes' as unknown as boolean }, '--prometheus'],
    [{ etcdQuota: '8G' }, '--etcd-quota'],
    [{ etcdQuota: '32Mi' }, '--etcd-quota'],
    [{ etcdQuota: '65Gi' }, '--etcd-quota'],
  ])('refuses %j, naming the flag and quoting the value', (o, flag) => {
    try {
      resolveSettings(o);
      expect.unreachable();
    } catch (e) {
      expect(isKrError(e) && e.code).toBe('LAB_BAD_OPTION');
      expect((e as Error).message).toContain(flag);
      expect((e as Error).message).toMatch(/\(got .+\)/);
    }
  });

  it('has one control-plane member unless told 3 or 5, named cp-1..N', () => {
    expect(resolveSettings({}).controlPlanes).toBe(1);
    expect(controlPlaneNodes(resolveSettings({ controlPlanes: 3 }))).toEqual(['cp-1', 'cp-2', 'cp-3']);
    expect(controlPlaneNodes({})).toEqual(['cp-1']);
  });

  it('runs Prometheus only when told', () => {
    expect(resolveSettings({}).prometheus).toBe(false);
    expect(resolveSettings({ prometheus: true }).prometheus).toBe(true);
    expect(resolveSettings({ prometheus: true, controlPlanes: 3 })).toMatchObject({ prometheus: true, controlPlanes: 3 });
  });

  it("gives etcd a 512 MiB space quota unless told more (a large cluster's objects need it)", () => {
    expect(resolveSettings({}).etcdQuotaBytes).toBe(512 * 2 ** 20);
    expect(resolveSettings({ etcdQuota: '8Gi' }).etcdQuotaBytes).toBe(8 * 2 ** 30);
    expect(resolveSettings({ etcdQuota: '768Mi' }).etcdQuotaBytes).toBe(768 * 2 ** 20);
  });

  it('has no workload without nodes', () => {
    expect(resolveSettings({ nodes: 0 }).workload).toBe(false);
  });

  it('spreads nodes over zones round-robin and writes Go durations', () => {
    expect([1, 2, 3, 4].map((i) => zoneOf(i, 3))).toEqual(['zone-a', 'zone-b', 'zone-c', 'zone-a']);
    expect(goDuration(8000)).toBe('8s');
    expect(goDuration(1500)).toBe('1500ms');
  });
});
