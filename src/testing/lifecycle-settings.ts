import type { LifecycleSettings } from '../kube/versions.js';

/** The lab's compressed timings (grace 8 s, monitor period 1 s, lease renewed every 2 s), the defaults otherwise. */
export const labSettings: LifecycleSettings = {
  nodeMonitorGracePeriodMs: 8_000,
  nodeMonitorPeriodMs: 1_000,
  nodeStartupGracePeriodMs: 60_000,
  nodeEvictionRate: 0.1,
  secondaryNodeEvictionRate: 0.01,
  unhealthyZoneThreshold: 0.55,
  largeClusterSizeThreshold: 50,
  leaseDurationMs: 8_000,
};

/** The lab's timings with a zone unhealthy from a quarter of its nodes on, as the simulated fleets want. */
export const simSettings: LifecycleSettings = { ...labSettings, secondaryNodeEvictionRate: 0.05, unhealthyZoneThreshold: 0.25 };
