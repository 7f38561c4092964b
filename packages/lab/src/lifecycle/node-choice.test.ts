import { describe, expect, it } from 'vitest';
import { cgroupV1Machine } from '../testing/lab-machine.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import type { LabBinariesInfo } from '../host/info.js';
import { chooseNodes } from './node-choice.js';

const bin = (version: string): LabBinariesInfo => ({
  dir: '/x',
  version,
  kubeApiserver: 'a',
  kubeControllerManager: 'c',
  kubeScheduler: 's',
  etcd: 'e',
});

let dir = '';
tempDirEach('kr-choice-', (d) => (dir = d));

describe('the nodes a demo lab gets', () => {
  it('simulated, with the reason, when not root', async () => {
    expect(await chooseNodes(bin('1.37.2'), { uid: 1000 })).toEqual({ real: false, reason: 'real nodes need root on Linux' });
  });

  it('simulated on 1.20, whose kubelet cannot use containerd 2', async () => {
    expect(await chooseNodes(bin('1.20.2'), { uid: 0 })).toEqual({
      real: false,
      reason: "Kubernetes 1.20.2's kubelet does not run on containerd 2 (real nodes run on 1.37 and 1.34)",
    });
  });

  it('simulated on a machine without what `lab up --real-nodes` checks, naming it', async () => {
    const machine = await cgroupV1Machine(dir, ['cpu', 'cpuacct', 'cpuset', 'memory'], 'nodev\tsysfs\n\text4\nnodev\toverlay\n');
    const c = await chooseNodes(bin('1.34.4'), { uid: 0, machine });
    expect(c).toEqual({ real: false, reason: 'real nodes need the cgroup v1 pids controller' });
  });
});
