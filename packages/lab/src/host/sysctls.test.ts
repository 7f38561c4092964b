import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { restoreKubeletSysctls, saveKubeletSysctls } from './sysctls.js';

let dir: string;
let proc: string;
let run: string;
let cgroups: string;
const set = (k: string, v: string) => writeFile(join(proc, k), `${v}\n`);
const get = async (k: string) => (await readFile(join(proc, k), 'utf8')).trim();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kr-sysctl-'));
  proc = join(dir, 'proc');
  run = join(dir, 'run');
  cgroups = join(dir, 'cgroup');
  for (const d of [join(proc, 'vm'), join(proc, 'kernel', 'keys'), run, cgroups]) await mkdir(d, { recursive: true });
  await set('vm/overcommit_memory', '0');
  await set('kernel/panic', '1');
  await set('kernel/panic_on_oops', '0');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('the kernel settings a kubelet changes', () => {
  it('are put back as they were before the first real node once the last one is gone', async () => {
    await saveKubeletSysctls(run, proc);
    // the kubelets set theirs
    await set('vm/overcommit_memory', '1');
    await set('kernel/panic', '10');
    await set('kernel/panic_on_oops', '1');
    // a second lab's real node started later records nothing over the first record
    await saveKubeletSysctls(run, proc);
    await mkdir(join(cgroups, 'kube-runbook-b-rnode-1'));
    expect(await restoreKubeletSysctls(run, cgroups, proc)).toEqual([]);
    expect(await get('kernel/panic')).toBe('10');
    await rm(join(cgroups, 'kube-runbook-b-rnode-1'), { recursive: true });
    // nor while a systemd node runs its kubelet
    await mkdir(join(cgroups, 'kube-runbook-systemd-sd-1'));
    expect(await restoreKubeletSysctls(run, cgroups, proc)).toEqual([]);
    await rm(join(cgroups, 'kube-runbook-systemd-sd-1'), { recursive: true });
    expect((await restoreKubeletSysctls(run, cgroups, proc)).sort()).toEqual([
      'kernel.panic=1',
      'kernel.panic_on_oops=0',
      'vm.overcommit_memory=0',
    ]);
    expect([await get('vm/overcommit_memory'), await get('kernel/panic'), await get('kernel/panic_on_oops')]).toEqual(['0', '1', '0']);
    // nothing recorded any more: a later down changes nothing
    await set('kernel/panic', '10');
    expect(await restoreKubeletSysctls(run, cgroups, proc)).toEqual([]);
    expect(await get('kernel/panic')).toBe('10');
  });
});
