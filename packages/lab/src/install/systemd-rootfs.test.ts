import { spawnSync } from 'node:child_process';
import { lstat, mkdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from 'kube-runbook/internal/core/logger.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { ensureSystemdRootfs, mmdebstrapArgs, ROOTFS_FIXUP, SYSTEMD_ROOTFS_PACKAGES, systemdRootfsDir } from './systemd-rootfs.js';

describe("a systemd node's root filesystem", () => {
  let root = '';
  tempDirEach('kr-rootfs-', (d) => (root = d));

  it('has what the node scripts call: systemctl and systemd-run, sshd, curl for health, flock', () => {
    for (const p of ['systemd', 'systemd-sysv', 'dbus', 'openssh-server', 'curl', 'util-linux', 'iproute2', 'iptables', 'runc'])
      expect(SYSTEMD_ROOTFS_PACKAGES).toContain(p);
    const args = mmdebstrapArgs('bookworm', '/c/rootfs', 'http://deb.example/debian');
    // the mirror is always given: without it, mmdebstrap reads its sources from stdin when stdin is not a terminal
    expect(args.slice(-3)).toEqual(['bookworm', '/c/rootfs', 'http://deb.example/debian']);
    expect(args).toContain('--mode=root');
    expect(args).toContain(`--include=${SYSTEMD_ROOTFS_PACKAGES.join(',')}`);
  });

  it('masks the console getty and the self-updating timers, and leaves an empty machine id for each boot', async () => {
    await mkdir(join(root, 'etc/systemd/system'), { recursive: true });
    await mkdir(join(root, 'var/lib/dbus'), { recursive: true });
    await writeFile(join(root, 'etc/machine-id'), '0123456789abcdef0123456789abcdef\n');
    await writeFile(join(root, 'var/lib/dbus/machine-id'), '0123456789abcdef0123456789abcdef\n');
    const r = spawnSync('sh', ['-euc', ROOTFS_FIXUP], { cwd: root, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(await readFile(join(root, 'etc/machine-id'), 'utf8')).toBe('');
    await expect(lstat(join(root, 'var/lib/dbus/machine-id'))).rejects.toThrow();
    for (const u of ['console-getty.service', 'apt-daily.timer', 'apt-daily-upgrade.timer'])
      expect(await readlink(join(root, 'etc/systemd/system', u))).toBe('/dev/null');
    expect((await lstat(join(root, 'root/.ssh'))).mode & 0o777).toBe(0o700);
  });

  it('is built once: a finished one in the cache is used as it is', async () => {
    const dir = systemdRootfsDir(root, 'bookworm');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '.kube-runbook-rootfs'), '{}\n');
    const got = await ensureSystemdRootfs({
      log: silentLogger,
      suite: 'bookworm',
      mirror: 'http://deb.example/debian',
      env: { KUBE_RUNBOOK_CACHE_DIR: root },
    });
    expect(got).toEqual({ dir, suite: 'bookworm' });
    expect(dir).toBe(join(root, 'node-rootfs-bookworm-systemd-v1'));
  });
});
