import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { mustSh } from './host.js';
import { instanceRunDir, machineRunDir } from './paths.js';

/**
 * A kubeadm node's own mount namespace. kubeadm writes /etc/kubernetes and /var/lib/kubelet by those names, and
 * the manifests it writes name them again (hostPath volumes the container runtime resolves), so every node of a
 * kubeadm lab needs its own at those paths: the node's containerd, its kubelet and the kubeadm run on it all live in
 * a mount namespace of the node where the node's directories are bound there. The namespace is kept by binding it
 * to a file (as `ip netns` keeps a network namespace), `<run>/<instance>/mnt/<node>`, in a directory bound onto
 * itself with private propagation (a namespace file may not be bound where the namespace itself would see it);
 * `lab down` unmounts both with the rest of the run directory, and the namespace goes with its last process.
 * Mounts of this machine made later reach the namespace (slave propagation); the node's own (containers' root
 * filesystems, pods' volumes) stay in it.
 */

/** kubeadm's directories, bound per node (etcd's data of a control-plane member: kubeadm's default dataDir). */
export const KUBEADM_DIRS = ['/etc/kubernetes', '/var/lib/kubelet', '/var/lib/etcd'] as const;
export type KubeadmDir = (typeof KUBEADM_DIRS)[number];

/** kubeadm's directories of a node whose files are under `nodeDir` (`<state>/nodes/<node>`): this machine's path → the node's. */
export const kubeadmBinds = (nodeDir: string): { from: string; at: KubeadmDir }[] => [
  { from: join(nodeDir, 'kubernetes'), at: '/etc/kubernetes' },
  { from: join(nodeDir, 'kubelet-root'), at: '/var/lib/kubelet' },
  { from: join(nodeDir, 'etcd-data'), at: '/var/lib/etcd' },
];

/**
 * A power cut of a kubeadm node (`lab reboot`, its processes already killed): its mount namespace and every mount in
 * it (containers' root filesystems, pods' volumes) go, and a new one is made with kubeadm's directories bound again,
 * as a node boots with its disks and no mounts. Nothing for a node without one.
 */
export async function remakeNodeMountNs(instance: string, node: string, nodeDir: string): Promise<void> {
  const file = mountNsFile(instance, node);
  if (!existsSync(file)) return;
  await mustSh('LAB_REAL_NODE_RUNTIME', `dropping ${node}'s mount namespace`, `umount ${shq(file)} 2>/dev/null || umount -l ${shq(file)}`);
  await makeNodeMountNs(instance, node, kubeadmBinds(nodeDir));
}

/** The file node `node`'s mount namespace is bound to. */
export const mountNsFile = (instance: string, node: string): string => join(instanceRunDir(instance), 'mnt', node);

/** Where the mount points this machine lacked were recorded when made (`lab down` of the last kubeadm lab removes them). */
const madeFile = () => join(machineRunDir(), 'kubeadm-mount-points');

/**
 * Makes node `node`'s mount namespace with `binds` (this machine's directory → the path in the node) and returns its
 * file. A bind needs a directory to mount on: those this machine lacks (KUBEADM_DIRS on a machine that is no
 * kubeadm node) are made empty and recorded; nothing is ever written into them outside the nodes' namespaces.
 */
export async function makeNodeMountNs(instance: string, node: string, binds: { from: string; at: KubeadmDir }[]): Promise<string> {
  const made: string[] = [];
  for (const b of binds) {
    await mkdir(b.from, { recursive: true });
    if (!existsSync(b.at)) {
      await mkdir(b.at, { recursive: true });
      made.push(b.at);
    }
  }
  if (made.length) {
    await mkdir(machineRunDir(), { recursive: true });
    const before = await readFile(madeFile(), 'utf8').catch(() => '');
    await writeFile(madeFile(), [...new Set([...before.split('\n').filter(Boolean), ...made])].map((d) => `${d}\n`).join(''));
  }
  const file = mountNsFile(instance, node);
  const dir = join(file, '..');
  const inNs = binds.map((b) => `mount --bind ${shq(b.from)} ${shq(b.at)}`).join(' && ');
  await mustSh(
    'LAB_REAL_NODE_RUNTIME',
    `making ${node}'s mount namespace`,
    `set -e
mkdir -p ${shq(dir)}
mountpoint -q ${shq(dir)} || mount --bind ${shq(dir)} ${shq(dir)}
mount --make-private ${shq(dir)}
touch ${shq(file)}
unshare --mount=${shq(file)} --propagation slave sh -c ${shq(inNs)}
`,
    { timeoutMs: 30_000 },
  );
  return file;
}

/** Runs `argv` in node `node`'s network and mount namespaces (sh text). */
export const inNode = (netns: string, mountNs: string, argv: string[]): string =>
  `nsenter --net=${shq(`/run/netns/${netns}`)} --mount=${shq(mountNs)} -- ${argv.map(shq).join(' ')}`;

/** The mount points (KUBEADM_DIRS) that kubeadm labs made on this machine, as recorded when they made them. */
export const madeMountPoints = async (): Promise<string[]> =>
  (await readFile(madeFile(), 'utf8').catch(() => '')).split('\n').filter(Boolean);

/** Whether a kubeadm lab's node mount namespace is left on this machine (any instance). */
export async function kubeadmNodesLeft(): Promise<boolean> {
  for (const inst of await readdir(machineRunDir()).catch(() => [] as string[]))
    if ((await readdir(join(machineRunDir(), inst, 'mnt')).catch(() => [] as string[])).length) return true;
  return false;
}

/**
 * After `lab down`: the mount points made for kubeadm labs, removed when empty and when no lab's node namespace
 * is left (a directory removed here would be unmounted in every namespace that mounts on it). What it removed.
 */
export async function releaseMountPoints(): Promise<string[]> {
  const recorded = await madeMountPoints();
  if (!recorded.length || (await kubeadmNodesLeft())) return [];
  const removed: string[] = [];
  for (const d of recorded)
    if (
      await rmdir(d).then(
        () => true,
        () => false,
      )
    )
      removed.push(d);
  await rm(madeFile(), { force: true });
  return removed;
}
