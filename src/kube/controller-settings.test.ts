import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { Inventory } from '../inventory/schema.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { resolveControllerSettings, settingsFromConfigz, settingsFromFlags } from './controller-settings.js';
import { parseKubeVersion, versionDefaults } from './versions.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { inventoryOf } from '../testing/inventories.js';

const kubeadmManifest = `apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - kube-controller-manager
    - --node-monitor-grace-period=20s
    - --node-monitor-period=2s
    - --node-eviction-rate=0.5
    - --large-cluster-size-threshold=10
    image: registry.k8s.io/kube-controller-manager:v1.29.0`;

describe('controller settings', () => {
  it('reads flags from a kubeadm manifest, a k3s config and a shell command line', () => {
    expect(settingsFromFlags(kubeadmManifest)).toEqual({
      nodeMonitorGracePeriodMs: 20_000,
      nodeMonitorPeriodMs: 2_000,
      nodeEvictionRate: 0.5,
      largeClusterSizeThreshold: 10,
    });
    expect(
      settingsFromFlags('kube-controller-manager-arg:\n  - "node-monitor-grace-period=1m0s"\n  - "unhealthy-zone-threshold=0.7"'),
    ).toEqual({
      nodeMonitorGracePeriodMs: 60_000,
      unhealthyZoneThreshold: 0.7,
    });
    expect(settingsFromFlags("exec '/usr/bin/kcm' '--node-monitor-grace-period=8s' --secondary-node-eviction-rate 0")).toEqual({
      nodeMonitorGracePeriodMs: 8_000,
      secondaryNodeEvictionRate: 0,
    });
  });

  it('reads /configz whatever the case of its keys', () => {
    const configz = {
      componentconfig: {
        KubeCloudShared: { NodeMonitorPeriod: '5s' },
        NodeLifecycleController: {
          NodeEvictionRate: 0.1,
          SecondaryNodeEvictionRate: 0.01,
          NodeStartupGracePeriod: '1m0s',
          NodeMonitorGracePeriod: '40s',
          LargeClusterSizeThreshold: 50,
          UnhealthyZoneThreshold: 0.55,
        },
      },
    };
    expect(settingsFromConfigz(configz)).toEqual({ ...versionDefaults(parseKubeVersion('v1.20.0')), leaseDurationMs: undefined });
  });

  it('takes the grace of 50 s from Kubernetes 1.32 on', () => {
    expect(versionDefaults(parseKubeVersion('v1.31.0')).nodeMonitorGracePeriodMs).toBe(40_000);
    expect(versionDefaults(parseKubeVersion('v1.32.0')).nodeMonitorGracePeriodMs).toBe(50_000);
  });

  it('resolves inventory first, then the manifest on a control-plane node, then the version defaults', async () => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock);
    kube.rawHandler = () => ({ status: 200, body: '{"gitVersion":"v1.32.1"}' });
    const inventory = Inventory.parse(
      inventoryOf(
        {
          layout: 'kubeadm',
          controller: { nodeMonitorPeriod: '3s' },
          nodes: [{ name: 'cp-1', address: '127.0.0.1', roles: ['control-plane'] }, { name: 'w-1' }],
        },
        't',
      ),
    );
    const nodes = new FakeNodes(inventory.spec.nodes, (c) => ({
      code: 0,
      stdout: c.script.includes('manifests') ? kubeadmManifest : '',
      stderr: '',
    }));
    const r = await resolveControllerSettings({ inventory, nodes, clock, log: memoryLogger(), kube });
    expect(r.settings).toMatchObject({
      nodeMonitorPeriodMs: 3_000,
      nodeMonitorGracePeriodMs: 20_000,
      nodeStartupGracePeriodMs: 60_000,
      leaseDurationMs: 40_000,
    });
    expect(r.sources).toMatchObject({
      nodeMonitorPeriodMs: 'inventory',
      nodeMonitorGracePeriodMs: 'manifest',
      nodeStartupGracePeriodMs: 'defaults',
    });
    expect(r.version).toBe('v1.32.1');
    expect(nodes.scriptsOn('cp-1')).toEqual(['cat /etc/kubernetes/manifests/kube-controller-manager.yaml 2>/dev/null || true']);
    kube.close();
  });
});
