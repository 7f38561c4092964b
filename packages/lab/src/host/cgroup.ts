import { existsSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';

/** Where the lab's etcd cgroup goes: the blkio hierarchy on cgroup v1, the unified one (io controller) on v2. */
export interface CgroupLayout {
  version: 1 | 2;
  /** The hierarchy root the lab's cgroups are made in. */
  root: string;
}

export function cgroupLayout(base = '/sys/fs/cgroup'): CgroupLayout | undefined {
  if (existsSync(join(base, 'cgroup.controllers'))) return { version: 2, root: base };
  if (existsSync(join(base, 'blkio'))) return { version: 1, root: join(base, 'blkio') };
  return undefined;
}

/** Makes the cgroup (and, on v2, enables the io controller for it); returns its directory. */
export async function makeCgroup(layout: CgroupLayout, name: string): Promise<string> {
  if (layout.version === 2) await writeFile(join(layout.root, 'cgroup.subtree_control'), '+io').catch(() => {});
  const dir = join(layout.root, name);
  await mkdir(dir, { recursive: true });
  return dir;
}

/**
 * SIGKILLs the processes `pids()` lists until it lists none (a killed process's children may appear a moment later),
 * at most 50 rounds 100 ms apart; returns how many it killed.
 */
export async function killUntilGone(pids: () => Promise<number[]>, clock: Clock = realClock): Promise<number> {
  let killed = 0;
  for (let i = 0; i < 50; i++) {
    const found = new Set(await pids());
    if (!found.size) break;
    for (const pid of found) {
      try {
        process.kill(pid, 'SIGKILL');
        killed++;
      } catch {
        // already gone
      }
    }
    await clock.sleep(100);
  }
  return killed;
}

/** Kills whatever still runs in the cgroup and removes it; quiet when it is not there. */
export async function removeCgroup(dir: string, clock: Clock = realClock): Promise<void> {
  if (!existsSync(dir)) return;
  await killUntilGone(() => cgroupPids(dir), clock);
  try {
    await rmdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

export async function cgroupPids(dir: string): Promise<number[]> {
  const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
}

/**
 * A cgroup a lab component's `run` script joins: `dir` in this mount namespace, `name` its path under the hierarchy's
 * root, `options` the hierarchy's controllers as `mount -t cgroup -o` takes them on v1 (`blkio`, `cpu,cpuacct`),
 * where the script mounts it itself inside `ip netns exec`'s fresh /sys.
 */
export interface CgroupJoin {
  dir: string;
  version: 1 | 2;
  name: string;
  options: string;
}
