import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { cgroupPids, killUntilGone } from './cgroup.js';

/**
 * A real node's cgroup, as a node's cgroupfs layout: `<name>/system/` holds its containerd and shims,
 * `<name>/kubelet/` its kubelet (a cgroup of its own, as kubeadm's `kubelet.service`, so its CPU can be limited alone),
 * `<name>/kubepods/` (made by the kubelet, whose cgroupRoot is `/<name>`) its pods' containers. On cgroup v1 the
 * directory is made in every mounted hierarchy, on v2 in the unified one with the controllers delegated to it.
 */
const BASE = '/sys/fs/cgroup';

/** Controllers the kubelet and runc need, per cgroup version. */
const NEEDED_CONTROLLERS = { 1: ['cpu', 'cpuacct', 'cpuset', 'memory', 'pids'], 2: ['cpu', 'cpuset', 'memory', 'pids'] } as const;

export interface Hierarchies {
  version: 1 | 2;
  /** The directories cgroups are made in: each v1 hierarchy's root (cpu, memory, ...), or the v2 root. */
  roots: string[];
  /** Controllers available. */
  controllers: string[];
}

/** The cgroup hierarchies mounted under `base`; undefined when there is none. */
export async function hierarchies(base = BASE): Promise<Hierarchies | undefined> {
  if (existsSync(join(base, 'cgroup.controllers'))) {
    const controllers = (await readFile(join(base, 'cgroup.controllers'), 'utf8')).trim().split(/\s+/).filter(Boolean);
    return { version: 2, roots: [base], controllers };
  }
  const roots: string[] = [];
  const controllers: string[] = [];
  for (const name of await readdir(base).catch(() => [] as string[])) {
    const dir = join(base, name);
    const st = await lstat(dir).catch(() => undefined);
    if (!st?.isDirectory() || !existsSync(join(dir, 'cgroup.procs'))) continue;
    roots.push(dir);
    controllers.push(...name.split(','));
  }
  return roots.length ? { version: 1, roots, controllers } : undefined;
}

/** What real nodes lack in `h` (no hierarchy at all, or controllers missing); empty when nothing. */
export function missingControllers(h: Hierarchies | undefined): string[] {
  if (!h) return [`a cgroup hierarchy under ${BASE}`];
  return NEEDED_CONTROLLERS[h.version].filter((c) => !h.controllers.includes(c)).map((c) => `the cgroup v${h.version} ${c} controller`);
}

/** Makes `<name>/`, `<name>/system/` and `<name>/kubelet/` in every hierarchy; returns the directories the daemons join. */
export async function makeNodeCgroup(h: Hierarchies, name: string): Promise<{ system: string[]; kubelet: string[] }> {
  const missing = missingControllers(h);
  if (missing.length)
    throw new KrError('LAB_REAL_NODE_MISSING', `real nodes need ${missing.join(', ')}, which this machine does not have`, {
      exit: EXIT.invalid,
    });
  const systems: string[] = [];
  const kubelets: string[] = [];
  for (const root of h.roots) {
    const dir = join(root, name);
    if (h.version === 2) await writeFile(join(root, 'cgroup.subtree_control'), NEEDED_CONTROLLERS[2].map((c) => `+${c}`).join(' '));
    await mkdir(join(dir, 'system'), { recursive: true });
    await mkdir(join(dir, 'kubelet'), { recursive: true });
    if (h.version === 2) await writeFile(join(dir, 'cgroup.subtree_control'), NEEDED_CONTROLLERS[2].map((c) => `+${c}`).join(' '));
    // a v1 cpuset cgroup takes no task until it has CPUs and memory nodes: those of its parent
    if (existsSync(join(root, 'cpuset.cpus')))
      for (const d of [dir, join(dir, 'system'), join(dir, 'kubelet')])
        for (const f of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(d, f), (await readFile(join(root, f), 'utf8')).trim());
    systems.push(join(dir, 'system'));
    kubelets.push(join(dir, 'kubelet'));
  }
  return { system: systems, kubelet: kubelets };
}

/** Every cgroup directory under `dir` (itself included), deepest first. */
async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) if (e.isDirectory()) await walk(join(d, e.name));
    out.push(d);
  };
  if (existsSync(dir)) await walk(dir);
  return out;
}

/** The instance's cgroup trees (directories named `<prefix>...` directly under a hierarchy's root). */
export async function cgroupTrees(prefix: string, base = BASE): Promise<string[]> {
  const h = await hierarchies(base);
  const out: string[] = [];
  for (const root of h?.roots ?? [])
    for (const name of await readdir(root).catch(() => [] as string[])) if (name.startsWith(prefix)) out.push(join(root, name));
  return out;
}

/** Pids in a cgroup tree. */
export async function treePids(dir: string): Promise<number[]> {
  const pids = new Set<number>();
  for (const d of await tree(dir)) for (const p of await cgroupPids(d)) pids.add(p);
  return [...pids];
}

/** Kills what still runs in the tree and removes it, deepest first; quiet when it is not there. */
export async function removeCgroupTree(dir: string, clock: Clock = realClock): Promise<void> {
  await killUntilGone(() => treePids(dir), clock);
  for (const d of await tree(dir)) {
    for (let i = 0; i < 20; i++) {
      try {
        await rmdir(d);
        break;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') break;
        // EBUSY for an instant after its last task died
        if (i === 19) throw e;
        await clock.sleep(100);
      }
    }
  }
}
