import { readFile } from 'node:fs/promises';
import { run } from './host.js';

/**
 * Mounts a real node leaves in this machine's mount namespace (its containerd and kubelet run in it, as on a
 * node): containers' rootfs overlays, sandboxes' /dev/shm, pods' network namespaces (nsfs), volume tmpfs.
 */

/** Mount points of `/proc/self/mountinfo` text (octal escapes such as `\040` decoded), in mount order. */
export function parseMountPoints(mountinfo: string): string[] {
  return mountinfo
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => Boolean(m))
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
}

/** Mount points at or under one of `dirs`, the last mounted first (the order to unmount them in). */
export function mountsUnder(mountinfo: string, dirs: string[]): string[] {
  const under = (m: string) => dirs.some((d) => m === d || m.startsWith(`${d.replace(/\/+$/, '')}/`));
  return parseMountPoints(mountinfo).filter(under).reverse();
}

export async function listMountsUnder(dirs: string[]): Promise<string[]> {
  return mountsUnder(await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''), dirs);
}

/** Unmounts everything under `dirs` (lazily when busy); returns what was mounted. */
export async function unmountUnder(dirs: string[]): Promise<string[]> {
  const found = await listMountsUnder(dirs);
  for (let round = 0; round < 3; round++) {
    const left = await listMountsUnder(dirs);
    if (!left.length) break;
    for (const m of left) {
      const r = await run('umount', [m]);
      if (r.code !== 0) await run('umount', ['-l', m]);
    }
  }
  return found;
}
