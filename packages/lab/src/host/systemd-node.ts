import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { alive } from './lock.js';
import { must, run } from './host.js';
import { hierarchies } from './node-cgroup.js';
import { machineRunDir } from './paths.js';
import { restoreKubeletSysctls, saveKubeletSysctls } from './sysctls.js';

/**
 * Boots systemd as PID 1 of a node: in a cgroup of its own (every v1 hierarchy, and the unified one), in the
 * node's network namespace, with new PID, mount, UTS, IPC and cgroup namespaces. Its root is an overlay of the
 * cached root filesystem (`$lower`, never written) and the node's own `$upper`, mounted inside the node's mount
 * namespace, so every mount of the node goes when its last process does. /proc, a read-only /sys (so udev stays
 * off), the cgroup hierarchies again (their roots are the node's cgroup, by the cgroup namespace), a /dev of its
 * own, and read-only binds of `src=dst` pairs. Arguments are positional, never spliced into the script.
 * `$1` name, `$2` lower, `$3` upper, `$4` work, `$5` merged, `$6…` binds.
 */
export const SYSTEMD_NODE_BOOT = `set -eu
name=$1 lower=$2 upper=$3 work=$4 r=$5
shift 5
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$r"
mount -t proc proc "$r/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$r/sys"
mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs "$r/sys/fs/cgroup"
for h in /sys/fs/cgroup/*/; do
  h=\${h%/}; b=\${h##*/}
  t=$(awk -v m="$h" '$2 == m { print $3 }' /proc/self/mounts)
  o=$(awk -v m="$h" '$2 == m { print $4 }' /proc/self/mounts)
  [ -n "$t" ] || continue
  mkdir -p "$r/sys/fs/cgroup/$b"
  mount -t "$t" -o "$o" "$t" "$r/sys/fs/cgroup/$b"
done
mount -o remount,ro,bind "$r/sys/fs/cgroup"
mount -t tmpfs -o mode=755,nosuid tmpfs "$r/dev"
for d in null zero full random urandom tty kmsg; do [ -e "/dev/$d" ] || continue; : >"$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done
mkdir -p "$r/dev/pts" "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
for b in "$@"; do
  src=\${b%%=*} dst=$r\${b#*=}
  mkdir -p "$dst"
  mount --bind "$src" "$dst"
  mount -o remount,ro,bind "$dst"
done
hostname "$name"
mkdir -p "$r/.oldroot"
cd "$r"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
exec env -i container=kube-runbook TERM=dumb /lib/systemd/systemd --system
`;

export interface SystemdNode {
  name: string;
  /** Its cgroup's name in every hierarchy (a lab's: `kube-runbook-<instance>-<node>`, which `lab down` removes). */
  cgroup: string;
  netns: string;
  /** The root filesystem the overlay's lower layer is (the cache's). */
  rootfs: string;
  /** The node's directory: its overlay's `upper` (what the node wrote, kept across reboots), `work`, `root`. */
  dir: string;
  /** Read-only binds into the node: directory of this machine → path in the node. */
  binds?: Record<string, string>;
}

export const systemdNodePaths = (dir: string) => ({
  upper: join(dir, 'upper'),
  work: join(dir, 'work'),
  root: join(dir, 'root'),
  console: join(dir, 'console.log'),
});

/** A node's name: its hostname, and part of its cgroups' names. */
function checkNodeName(name: string): string {
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name))
    throw new KrError('LAB_SYSTEMD_NODE', `a node's name is lower-case letters, digits and '-' (a host name), got ${JSON.stringify(name)}`);
  return name;
}

/** The node's cgroup `cgroup` in each v1 hierarchy and the unified one. */
async function cgroupDirs(cgroup: string): Promise<string[]> {
  if (!/^kube-runbook-[A-Za-z0-9_.-]+$/.test(cgroup))
    throw new KrError(
      'LAB_SYSTEMD_NODE',
      `a node's cgroup is named kube-runbook-<letters, digits, "_", "." and "-">, got ${JSON.stringify(cgroup)}`,
    );
  return (await readdir('/sys/fs/cgroup', { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => join('/sys/fs/cgroup', e.name, cgroup));
}

/** The argv that boots a node (run by a shell that is already in the node's cgroup). */
export function systemdNodeArgv(n: SystemdNode): string[] {
  checkNodeName(n.name);
  const p = systemdNodePaths(n.dir);
  const binds = Object.entries(n.binds ?? {}).map(([src, dst]) => `${src}=${dst}`);
  for (const b of binds)
    if (!/^\/[^=]*=\/[^=]*$/.test(b)) throw new KrError('LAB_SYSTEMD_NODE', `a bind is an absolute path to an absolute path, got ${b}`);
  return [
    'nsenter',
    `--net=/run/netns/${n.netns}`,
    'unshare',
    '--pid',
    '--fork',
    '--mount',
    '--uts',
    '--ipc',
    '--cgroup',
    '--propagation',
    'private',
    'sh',
    '-c',
    SYSTEMD_NODE_BOOT,
    'sh',
    n.name,
    n.rootfs,
    p.upper,
    p.work,
    p.root,
    ...binds,
  ];
}

/** PID (in this machine's namespace) of the node's PID 1: the child of the `unshare --fork` process. */
async function pidOne(unsharePid: number): Promise<number | undefined> {
  const text = await readFile(`/proc/${unsharePid}/task/${unsharePid}/children`, 'utf8').catch(() => '');
  const pid = Number(text.trim().split(/\s+/)[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Boots the node (its network namespace must exist) and waits until systemd answers: returns the PID of its
 * PID 1 in this machine's namespace. The node's cgroup is made in every hierarchy first; a v1 cpuset cgroup
 * takes no task until it has its parent's CPUs and memory nodes.
 */
export async function bootSystemdNode(n: SystemdNode, o: { clock: Clock; timeoutMs?: number }): Promise<number> {
  const p = systemdNodePaths(n.dir);
  for (const d of [p.upper, p.work, p.root]) await mkdir(d, { recursive: true });
  checkNodeName(n.name);
  const cgroups = await cgroupDirs(n.cgroup);
  for (const d of cgroups) {
    await mkdir(d, { recursive: true });
    if (d.includes('/cpuset/'))
      for (const f of ['cpuset.cpus', 'cpuset.mems'])
        await must('LAB_SYSTEMD_NODE', 'sh', ['-c', 'cat "$1" >"$2"', 'sh', join(d, '..', f), join(d, f)]);
  }
  const argv = systemdNodeArgv(n);
  // its kubelet sets machine-wide kernel settings at start, as a real node's does: put back once the last node is gone
  await saveKubeletSysctls(machineRunDir());
  const out = openSync(p.console, 'a');
  // the shell joins the node's cgroups, then becomes the boot (its PID stays, so everything below is in them)
  const child = spawn('sh', ['-c', 'for d in $CGROUPS; do echo $$ >"$d/cgroup.procs"; done; exec "$@"', 'sh', ...argv], {
    detached: true,
    stdio: ['ignore', out, out],
    env: { ...process.env, CGROUPS: cgroups.join(' ') },
  });
  closeSync(out);
  child.unref();
  const unsharePid = child.pid!;
  const deadline = o.clock.now() + (o.timeoutMs ?? 60_000);
  for (;;) {
    const pid = await pidOne(unsharePid);
    if (pid) {
      const r = await run('nsenter', ['-t', String(pid), '-a', 'systemctl', 'is-system-running', '--wait'], { timeoutMs: 5_000 });
      if (/^(running|degraded)$/m.test(r.stdout)) return pid;
    }
    if (!alive(unsharePid) || o.clock.now() > deadline) {
      await killLeftoverSystemdNode(n.cgroup, o);
      throw new KrError('LAB_SYSTEMD_NODE', `node ${n.name}: systemd did not come up (see ${p.console})`);
    }
    await o.clock.sleep(500);
  }
}

/** Runs argv inside every namespace of the node whose PID 1 is `pid`. */
export const inSystemdNode = (pid: number, argv: string[], timeoutMs = 30_000) =>
  run('nsenter', ['-t', String(pid), '-a', ...argv], { timeoutMs });

/** The kernel settings kubelets change, put back when no node that runs one is left; returns those restored. */
async function restoreSysctls(): Promise<string[]> {
  const root = (await hierarchies())?.roots[0];
  return root ? restoreKubeletSysctls(machineRunDir(), root) : [];
}

/**
 * What is left of a node whose PID is not known (its boot's process killed before it could stop it): every process
 * in its cgroup `cgroup` killed (SIGKILL), then its cgroups removed. Nothing when it has none.
 */
export async function killLeftoverSystemdNode(cgroup: string, o: { clock: Clock }): Promise<number> {
  const pids = new Set<number>();
  const collect = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
    if (!entries) return;
    for (const p of (await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n'))
      if (/^\d+$/.test(p)) pids.add(Number(p));
    for (const e of entries) if (e.isDirectory()) await collect(join(dir, e.name));
  };
  for (const d of await cgroupDirs(cgroup)) await collect(d);
  for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  for (const d of await cgroupDirs(cgroup)) await removeCgroup(d, o.clock);
  if (pids.size) await restoreSysctls();
  return pids.size;
}

async function removeCgroup(dir: string, clock: Clock): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
  if (!entries) return;
  for (const e of entries) if (e.isDirectory()) await removeCgroup(join(dir, e.name), clock);
  for (let i = 0; i < 50; i++) {
    try {
      await rmdir(dir);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      await clock.sleep(100); // EBUSY while the last processes exit
    }
  }
  throw new KrError('LAB_SYSTEMD_NODE', `cannot remove cgroup ${dir}: processes left in it`);
}
