import { describe, expect, it } from 'vitest';
import { parseKubeVersion, traitsOf, versionDefaults } from './versions.js';

const v = (s: string) => parseKubeVersion(s);

describe('Kubernetes versions', () => {
  it('reads what /version says', () => {
    expect(v('v1.37.2')).toMatchObject({ major: 1, minor: 37, patch: 2 });
    expect(v('1.20.2')).toMatchObject({ minor: 20 });
    expect(v('v1.34.0-rc.1+abc')).toMatchObject({ minor: 34, patch: 0 });
    expect(v('v0.0.0-master+$Format:%H$')).toMatchObject({ major: 0, minor: 0 });
    expect(v('garbage')).toBeUndefined();
  });

  it('the taint-eviction controller is its own since 1.29; DisruptionTarget is written since 1.26', () => {
    expect(traitsOf(v('v1.28.9'))).toMatchObject({
      taintEvictor: 'node-lifecycle-controller',
      canDisableTaintEviction: false,
      writesDisruptionTarget: true,
    });
    expect(traitsOf(v('v1.29.0'))).toMatchObject({ taintEvictor: 'taint-eviction-controller', canDisableTaintEviction: true });
    expect(traitsOf(v('v1.20.2'))).toMatchObject({ writesDisruptionTarget: false, hasPodEvictionTimeoutFlag: true });
    expect(traitsOf(v('v1.37.2'))).toMatchObject({
      writesDisruptionTarget: true,
      hasPodEvictionTimeoutFlag: false,
      taintsInTheSamePass: true,
    });
    // watch-list's sendInitialEvents: known since 1.27, not asked of older servers (they would ignore it)
    expect([v('v1.26.15'), v('v1.27.0'), v('v1.34.4'), undefined].map((x) => traitsOf(x).knowsSendInitialEvents)).toEqual([
      false,
      true,
      true,
      false,
    ]);
    expect(traitsOf(v('v1.20.2')).taintsInTheSamePass).toBe(false);
    expect(traitsOf(undefined).taintsInTheSamePass).toBe(true);
    // the taint queue: first in, first out on 1.20, re-queued in the workers' order every pass on 1.34 and 1.37
    expect([v('v1.20.2'), v('v1.34.4'), v('v1.37.2'), undefined].map((x) => traitsOf(x).requeuesEveryPass)).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  it('device taints evict by default since 1.36; DeviceTaintRules are served in resource.k8s.io/v1 since 1.37', () => {
    const of = (s: string) => traitsOf(v(s));
    expect([of('v1.34.4'), of('v1.35.0'), of('v1.36.1'), of('v1.37.2')].map((t) => t.evictsForDeviceTaints)).toEqual([
      false,
      false,
      true,
      true,
    ]);
    expect([of('v1.36.1'), of('v1.37.2')].map((t) => t.servesDeviceTaintRules)).toEqual([false, true]);
    expect(traitsOf(undefined).evictsForDeviceTaints).toBe(false);
  });

  it('an unknown version takes the safe side: 40 s grace, inferred causes, no taint-eviction switch', () => {
    expect(versionDefaults(undefined).nodeMonitorGracePeriodMs).toBe(40_000);
    expect(traitsOf(undefined)).toMatchObject({ canDisableTaintEviction: false, writesDisruptionTarget: false });
    expect(versionDefaults(v('v1.32.0')).nodeMonitorGracePeriodMs).toBe(50_000);
    expect(versionDefaults(v('v1.31.9')).nodeMonitorGracePeriodMs).toBe(40_000);
  });
});
