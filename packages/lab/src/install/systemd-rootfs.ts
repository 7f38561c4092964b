import { rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { ensureAptPackages } from './install.js';
import { must } from '../host/host.js';
import { withLock } from '../host/lock.js';
import { cacheDir as defaultCacheDir } from '../host/paths.js';

/**
 * The Debian packages of a systemd node's root filesystem: systemd as PID 1 (with dbus and logind, which
 * systemctl and systemd-run talk to), sshd (how the executor reaches the node), and what the product's node
 * scripts and the node's components call (curl for health checks, iproute2, iptables, runc for containerd).
 */
export const SYSTEMD_ROOTFS_PACKAGES = [
  'systemd',
  'systemd-sysv',
  'dbus',
  'openssh-server',
  'iproute2',
  'iptables',
  'procps',
  'curl',
  'ca-certificates',
  'runc',
  'kmod',
  'util-linux',
];

/** Bump when the recipe changes: the cache keeps one directory per version. */
const RECIPE = 1;

/** Where the root filesystem of a release is cached: `<cache>/node-rootfs-<suite>-systemd-v<recipe>`. */
export const systemdRootfsDir = (root: string, suite: string): string => join(root, `node-rootfs-${suite}-systemd-v${RECIPE}`);

/** mmdebstrap's arguments: a minimal Debian of `suite` with the packages above, maintainer scripts run (root mode). */
export function mmdebstrapArgs(suite: string, dir: string, mirror: string): string[] {
  return ['--variant=minbase', '--mode=root', `--include=${SYSTEMD_ROOTFS_PACKAGES.join(',')}`, suite, dir, mirror];
}

/**
 * What a node's boot would trip over, removed once in the image: no console (console-getty fails and leaves the
 * system `degraded`), no machine id (each boot makes one, as a container's first boot does), nothing that
 * updates the image by itself.
 */
export const ROOTFS_FIXUP = [
  'rm -f etc/machine-id var/lib/dbus/machine-id && : > etc/machine-id',
  'for u in console-getty.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer; do ln -sf /dev/null "etc/systemd/system/$u"; done',
  'mkdir -p root/.ssh && chmod 700 root/.ssh',
].join('\n');

export interface SystemdRootfs {
  dir: string;
  suite: string;
}

/**
 * A Debian root filesystem with systemd, built once into the cache by mmdebstrap (installed with apt-get when
 * missing) from the machine's own suite and mirror. Nodes never write to it: each boots on an overlay of it.
 */
export async function ensureSystemdRootfs(o: {
  log: Logger;
  suite: string;
  mirror: string;
  clock?: Clock;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}): Promise<SystemdRootfs> {
  const root = defaultCacheDir(o.env ?? process.env);
  const dir = systemdRootfsDir(root, o.suite);
  const done = join(dir, '.kube-runbook-rootfs');
  const ready = () =>
    stat(done).then(
      () => true,
      () => false,
    );
  if (await ready()) return { dir, suite: o.suite };
  await ensureAptPackages(['mmdebstrap'], o);
  return withLock(
    `${dir}.lock`,
    async () => {
      if (await ready()) return { dir, suite: o.suite };
      const tmp = `${dir}.tmp`;
      await rm(tmp, { recursive: true, force: true });
      o.log.info(`building a ${o.suite} root filesystem with systemd for nodes (mmdebstrap, about a minute)`);
      await must('LAB_ROOTFS_FAILED', 'mmdebstrap', mmdebstrapArgs(o.suite, tmp, o.mirror), { timeoutMs: 1_200_000, signal: o.signal });
      await must('LAB_ROOTFS_FAILED', 'sh', ['-euc', ROOTFS_FIXUP], { cwd: tmp });
      await writeFile(join(tmp, '.kube-runbook-rootfs'), `${JSON.stringify({ recipe: RECIPE, suite: o.suite, mirror: o.mirror })}\n`);
      await rename(tmp, dir);
      return { dir, suite: o.suite };
    },
    { timeoutMs: 1_800_000, clock: o.clock },
  );
}
