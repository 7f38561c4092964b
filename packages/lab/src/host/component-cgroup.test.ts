import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { CONTROL_PLANE_SERVICES, makeComponentCgroups } from './component-cgroup.js';
import { hierarchies } from './node-cgroup.js';

describe("a control-plane member's cpu cgroups", () => {
  let base: string;
  tempDirEach('kr-cp-cgroup-', (d) => (base = d));

  const v1 = async (names: string[]) => {
    for (const n of names) {
      await mkdir(join(base, n));
      await writeFile(join(base, n, 'cgroup.procs'), '');
    }
    return hierarchies(base);
  };

  it('on v1: one per component in the cpu hierarchy only, each mounted with all its controllers', async () => {
    const made = await makeComponentCgroups(await v1(['cpu,cpuacct', 'blkio', 'memory']), 'kube-runbook-t-cp-2', CONTROL_PLANE_SERVICES);
    expect([...made.keys()]).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler']);
    expect(made.get('kube-apiserver')).toEqual({
      dir: join(base, 'cpu,cpuacct', 'kube-runbook-t-cp-2', 'kube-apiserver'),
      version: 1,
      name: 'kube-runbook-t-cp-2/kube-apiserver',
      options: 'cpu,cpuacct',
    });
    for (const s of CONTROL_PLANE_SERVICES) expect(existsSync(join(base, 'cpu,cpuacct', 'kube-runbook-t-cp-2', s))).toBe(true);
    expect(existsSync(join(base, 'memory', 'kube-runbook-t-cp-2'))).toBe(false);
    expect(existsSync(join(base, 'blkio', 'kube-runbook-t-cp-2'))).toBe(false);
  });

  it('on v2: the cpu controller delegated down to them; etcd stays in its io cgroup (a process is in one cgroup only)', async () => {
    await writeFile(join(base, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    const made = await makeComponentCgroups(await hierarchies(base), 'kube-runbook-t-cp-1', CONTROL_PLANE_SERVICES);
    expect([...made.keys()]).toEqual(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']);
    expect(made.get('kube-scheduler')).toMatchObject({ version: 2, name: 'kube-runbook-t-cp-1/kube-scheduler' });
    expect(await readFile(join(base, 'cgroup.subtree_control'), 'utf8')).toBe('+cpu');
    expect(await readFile(join(base, 'kube-runbook-t-cp-1', 'cgroup.subtree_control'), 'utf8')).toBe('+cpu');
  });

  it('without a cpu controller makes nothing: the components stay where the lab runs', async () => {
    expect((await makeComponentCgroups(await v1(['blkio', 'memory']), 'kube-runbook-t-cp-1', CONTROL_PLANE_SERVICES)).size).toBe(0);
    expect(existsSync(join(base, 'blkio', 'kube-runbook-t-cp-1'))).toBe(false);
    expect((await makeComponentCgroups(undefined, 'kube-runbook-t-cp-1', CONTROL_PLANE_SERVICES)).size).toBe(0);
  });

  it('on a v2 root that refuses to delegate the cpu controller: nothing, and no error', async () => {
    await writeFile(join(base, 'cgroup.controllers'), 'cpu io\n');
    // writing cgroup.subtree_control fails (EBUSY on a namespace root with processes; here EISDIR)
    await mkdir(join(base, 'cgroup.subtree_control'));
    expect((await makeComponentCgroups(await hierarchies(base), 'kube-runbook-t-cp-1', CONTROL_PLANE_SERVICES)).size).toBe(0);
    expect(existsSync(join(base, 'kube-runbook-t-cp-1'))).toBe(false);
  });
});
