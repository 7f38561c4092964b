import { mkdir, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { CgroupJoin } from './cgroup.js';
import type { Hierarchies } from './node-cgroup.js';

/** A control-plane member's components, as the lab's services name them. */
export const CONTROL_PLANE_SERVICES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'];

/**
 * A control-plane member's components each in a cpu cgroup of their own, `<member>/<service>`, as kubeadm's static
 * pods each have their container's: `starve-cpu` can then limit one component of one member. On cgroup v1 they go in
 * the cpu hierarchy; on v2 in the unified one with the cpu controller delegated, where a process is in one cgroup
 * only: etcd stays in its io cgroup (`throttle-etcd-disk`'s), which the cpu controller then reaches too. Without a
 * cpu controller, or where it cannot be delegated, nothing is made, and `starve-cpu` refuses the components as running in the root cgroup.
 */
export async function makeComponentCgroups(
  h: Hierarchies | undefined,
  member: string,
  services: string[],
): Promise<Map<string, CgroupJoin>> {
  const out = new Map<string, CgroupJoin>();
  if (!h?.controllers.includes('cpu')) return out;
  const root = h.version === 2 ? h.roots[0] : h.roots.find((r) => basename(r).split(',').includes('cpu'));
  if (!root) return out;
  const wanted = h.version === 2 ? services.filter((s) => s !== 'etcd') : services;
  try {
    if (h.version === 2) await writeFile(join(root, 'cgroup.subtree_control'), '+cpu');
    await mkdir(join(root, member), { recursive: true });
    if (h.version === 2) await writeFile(join(root, member, 'cgroup.subtree_control'), '+cpu');
  } catch {
    // a v2 root that keeps processes of its own (a container's namespace) takes no controller for its children
    return out;
  }
  for (const s of wanted) {
    const dir = join(root, member, s);
    await mkdir(dir, { recursive: true });
    out.set(s, { dir, version: h.version, name: `${member}/${s}`, options: h.version === 2 ? '' : basename(root) });
  }
  return out;
}
