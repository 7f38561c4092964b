import { describe, expect, it } from 'vitest';
import type { LabInfo } from '../host/info.js';
import { resolveSettings, type LabUpOptions } from '../host/settings.js';
import { upLine } from './render.js';

const info = (o: LabUpOptions, members?: number): LabInfo =>
  ({
    instance: 'u1',
    upSeconds: 41.1,
    binaries: { version: '1.37.2' },
    apiserverUrl: members ? 'https://10.213.3.250:6443' : 'https://10.213.3.2:6443',
    settings: resolveSettings(o),
    ...(members ? { members: Array.from({ length: members }, (_, i) => ({ name: `cp-${i + 1}`, ip: `10.213.3.${2 + i}` })) } : {}),
  }) as LabInfo;

describe('the line lab up prints', () => {
  it('counts the nodes kubectl shows: every worker of each kind, and the control-plane members that are nodes', () => {
    expect(upLine(info({ nodes: 3 }))).toBe(
      'lab u1 is up in 41.1s: Kubernetes 1.37.2, 3 node(s) Ready (3 worker(s)), apiserver https://10.213.3.2:6443',
    );
    expect(upLine(info({ nodes: 1, realNodes: 2 }))).toBe(
      'lab u1 is up in 41.1s: Kubernetes 1.37.2, 3 node(s) Ready (3 worker(s): 1 simulated, 2 real), apiserver https://10.213.3.2:6443',
    );
    expect(upLine(info({ nodes: 0, realNodes: 1, kubeadm: true, systemdNodes: 1 }))).toBe(
      'lab u1 is up in 41.1s: Kubernetes 1.37.2, 3 node(s) Ready (2 worker(s): 1 real, 1 with systemd as PID 1; 1 control-plane), apiserver https://10.213.3.2:6443',
    );
    expect(upLine(info({ nodes: 0, realNodes: 1, kubeadm: true, controlPlanes: 3 }, 3))).toBe(
      'lab u1 is up in 41.1s: Kubernetes 1.37.2, 4 node(s) Ready (1 worker(s): 1 real; 3 control-plane), 3 control-plane members behind the VIP https://10.213.3.250:6443',
    );
    // the lab's own HA control plane runs no kubelet on its members
    expect(upLine(info({ nodes: 2, controlPlanes: 3 }, 3))).toContain('2 node(s) Ready (2 worker(s)), 3 control-plane members');
  });
});
