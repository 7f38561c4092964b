import { describe, expect, it } from 'vitest';
import { checkInstance, labNames, labPaths } from './paths.js';

describe('lab names and paths', () => {
  it('accepts instance names of 1 to 6 characters a-z0-9 only', () => {
    expect(checkInstance('lab')).toBe('lab');
    expect(checkInstance('e2e42x')).toBe('e2e42x');
    for (const bad of ['', 'toolong7', 'Lab', 'a-b', 'a b', '../x']) expect(() => checkInstance(bad)).toThrow(/a-z or 0-9/);
  });

  it('names everything after the instance, within the 15-character interface limit', () => {
    const n = labNames('abcdef');
    expect(n.netns('node-12')).toBe('kr-abcdef-node-12');
    expect(n.veth('cp-1')).toBe('kr-abcdef-c1');
    expect(n.veth('node-9999')).toBe('kr-abcdef-n9999');
    expect(n.veth('lb')).toBe('kr-abcdef-lb');
    expect(n.veth('prom')).toBe('kr-abcdef-pm');
    expect(n.veth('sd-1')).toBe('kr-abcdef-s1');
    expect(n.netns('prom')).toBe('kr-abcdef-prom');
    expect(n.veth('node-9999').length).toBeLessThanOrEqual(15);
    expect(n.bridge.length).toBeLessThanOrEqual(15);
    expect(() => n.veth('node-99999')).toThrow(/too long/);
    expect(() => n.veth('worker-1')).toThrow(/cp-N, node-N, rnode-N or sd-N/);
    expect(n.veth('rnode-39')).toBe('kr-abcdef-r39');
    expect(n.nodeCgroup('rnode-2')).toBe('kube-runbook-abcdef-rnode-2');
    expect(n.nodeCgroup('rnode-2').startsWith(n.cgroupPrefix)).toBe(true);
  });

  it('keeps instances apart: no name of one is a prefix-match of another', () => {
    const a = labNames('lab');
    const b = labNames('lab2');
    expect(b.netns('node-1').startsWith(a.prefix)).toBe(false);
    expect(b.chain.startsWith(a.chainPrefix)).toBe(false);
    expect(a.cgroup).not.toBe(b.cgroup);
    expect(b.nodeCgroup('rnode-1').startsWith(a.cgroupPrefix)).toBe(false);
  });

  it('names the context lab for the default instance, lab-<inst> otherwise', () => {
    expect(labNames('lab').context).toBe('lab');
    expect(labNames('t1').context).toBe('lab-t1');
  });

  it('puts the state under KUBE_RUNBOOK_LAB_HOME, else XDG_STATE_HOME, else ~/.local/state', () => {
    expect(labPaths('x', { KUBE_RUNBOOK_LAB_HOME: '/tmp/labs' }).stateDir).toBe('/tmp/labs/x');
    expect(labPaths('x', { XDG_STATE_HOME: '/s' }).stateDir).toBe('/s/kube-runbook/lab/x');
    const p = labPaths('lab', { KUBE_RUNBOOK_LAB_HOME: '/h' });
    expect(p.kubeconfig).toBe('/h/lab/kubeconfig');
    expect(p.inventoryFile).toBe('/h/lab/inventory.yaml');
    expect(p.serviceDir('cp-1', 'etcd')).toBe('/h/lab/nodes/cp-1/etcd');
    expect(p.runtimeDir('node-2')).toBe('/h/lab/nodes/node-2/runtime');
  });
});
