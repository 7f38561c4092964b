import { existsSync } from 'node:fs';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Kernel settings every kubelet sets on its machine at start (vm.overcommit_memory=1, kernel.panic=10,
 * kernel.panic_on_oops=1, ...): on a node they belong to the node; here the machine is shared, so the lab keeps
 * their values from before the first real node started and puts them back when the last real node of any
 * instance is gone.
 */
const KUBELET_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
] as const;

/** The cgroups of nodes whose kubelet may run: a lab's real node (`kube-runbook-<inst>-rnode-N`), a systemd node. */
const KUBELET_NODE_CGROUP = /^kube-runbook-(?:[a-z0-9]+-rnode-\d+|systemd-[a-z0-9-]+)$/;

const savedFile = (runDir: string) => join(runDir, 'sysctls-before-kubelet.json');

/** Records the current values unless a record exists already (another real-node lab runs). */
export async function saveKubeletSysctls(runDir: string, procSys = '/proc/sys'): Promise<void> {
  if (existsSync(savedFile(runDir))) return;
  const values: Record<string, string> = {};
  for (const k of KUBELET_SYSCTLS) {
    const v = await readFile(join(procSys, k), 'utf8').catch(() => undefined);
    if (v !== undefined) values[k] = v.trim();
  }
  await writeFile(savedFile(runDir), `${JSON.stringify(values, null, 2)}\n`);
}

/**
 * Puts the recorded values back when no real node of any instance, nor systemd node, is left (no
 * `kube-runbook-*-rnode-*` or `kube-runbook-systemd-*` cgroup in `cgroupRoot`); returns the settings restored.
 */
export async function restoreKubeletSysctls(runDir: string, cgroupRoot: string, procSys = '/proc/sys'): Promise<string[]> {
  if (!existsSync(savedFile(runDir))) return [];
  const others = (await readdir(cgroupRoot).catch(() => [] as string[])).filter((n) => KUBELET_NODE_CGROUP.test(n));
  if (others.length) return [];
  const values = JSON.parse(await readFile(savedFile(runDir), 'utf8')) as Record<string, string>;
  const restored: string[] = [];
  for (const [k, v] of Object.entries(values)) {
    const now = (await readFile(join(procSys, k), 'utf8').catch(() => '')).trim();
    if (now === v) continue;
    await writeFile(join(procSys, k), v).then(
      () => restored.push(`${k.replaceAll('/', '.')}=${v}`),
      () => undefined,
    );
  }
  await rm(savedFile(runDir), { force: true });
  return restored;
}
