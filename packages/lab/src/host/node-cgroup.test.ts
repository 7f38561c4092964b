import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isKrError } from 'kube-runbook/internal/core/errors.js';
import { cgroupTrees, hierarchies, makeNodeCgroup, missingControllers, treePids } from './node-cgroup.js';

let base: string;
beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'kr-cgroup-'));
});
afterEach(() => rm(base, { recursive: true, force: true }));

/** A cgroup v1 layout: one directory per controller, each with cgroup.procs (cpuset with its CPUs and memory nodes). */
async function v1(controllers: string[]): Promise<void> {
  for (const c of controllers) {
    await mkdir(join(base, c), { recursive: true });
    await writeFile(join(base, c, 'cgroup.procs'), '');
  }
  if (controllers.includes('cpuset')) {
    await writeFile(join(base, 'cpuset', 'cpuset.cpus'), '0-1\n');
    await writeFile(join(base, 'cpuset', 'cpuset.mems'), '0\n');
  }
}

describe("a real node's cgroup", () => {
  it('finds every v1 hierarchy and says which controller real nodes lack', async () => {
    await v1(['cpu', 'cpuacct', 'cpuset', 'pids', 'blkio']);
    const h = await hierarchies(base);
    expect(h).toMatchObject({ version: 1 });
    expect(h?.roots).toHaveLength(5);
    expect(missingControllers(h)).toEqual(['the cgroup v1 memory controller']);
    try {
      await makeNodeCgroup(h!, 'kube-runbook-t-rnode-1');
      expect.unreachable();
    } catch (e) {
      expect(isKrError(e) && e.code).toBe('LAB_REAL_NODE_MISSING');
      expect(isKrError(e) && e.exit).toBe(2);
      expect((e as Error).message).toMatch(/cgroup v1 memory controller/);
    }
  });

  it('reads the v2 controllers from the unified root', async () => {
    await writeFile(join(base, 'cgroup.controllers'), 'cpuset cpu io memory\n');
    const h = await hierarchies(base);
    expect(h).toEqual({ version: 2, roots: [base], controllers: ['cpuset', 'cpu', 'io', 'memory'] });
    expect(missingControllers(h)).toEqual(['the cgroup v2 pids controller']);
    expect(missingControllers(undefined)).toEqual(['a cgroup hierarchy under /sys/fs/cgroup']);
  });

  it('is made in every v1 hierarchy with system/ and kubelet/ children, cpusets filled from the parent', async () => {
    await v1(['cpu', 'cpuacct', 'cpuset', 'memory', 'pids']);
    const made = await makeNodeCgroup((await hierarchies(base))!, 'kube-runbook-t-rnode-1');
    expect(made.system.sort()).toEqual(
      ['cpu', 'cpuacct', 'cpuset', 'memory', 'pids'].map((c) => join(base, c, 'kube-runbook-t-rnode-1', 'system')),
    );
    expect(made.kubelet.sort()).toEqual(
      ['cpu', 'cpuacct', 'cpuset', 'memory', 'pids'].map((c) => join(base, c, 'kube-runbook-t-rnode-1', 'kubelet')),
    );
    expect(await readFile(join(base, 'cpuset', 'kube-runbook-t-rnode-1', 'system', 'cpuset.cpus'), 'utf8')).toBe('0-1');
    expect(await readFile(join(base, 'cpuset', 'kube-runbook-t-rnode-1', 'kubelet', 'cpuset.mems'), 'utf8')).toBe('0');
    expect((await cgroupTrees('kube-runbook-t-', base)).length).toBe(5);
    expect(await cgroupTrees('kube-runbook-t2-', base)).toEqual([]);
    await writeFile(join(base, 'pids', 'kube-runbook-t-rnode-1', 'system', 'cgroup.procs'), '11\n12\n');
    await mkdir(join(base, 'pids', 'kube-runbook-t-rnode-1', 'kubepods', 'pod1'), { recursive: true });
    await writeFile(join(base, 'pids', 'kube-runbook-t-rnode-1', 'kubepods', 'pod1', 'cgroup.procs'), '13\n');
    expect((await treePids(join(base, 'pids', 'kube-runbook-t-rnode-1'))).sort()).toEqual([11, 12, 13]);
  });
});
