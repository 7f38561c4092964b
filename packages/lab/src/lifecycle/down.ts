import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { cgroupLayout, cgroupPids, removeCgroup } from '../host/cgroup.js';
import { readLabInfoFile } from '../host/info.js';
import { alive, withLock } from '../host/lock.js';
import { listChains, listLinks, listNetns, netnsPids, removeNet } from '../host/net.js';
import { instanceRunDir, labNames, labPaths, machineRunDir } from '../host/paths.js';
import { listMountsUnder, unmountUnder } from '../host/mounts.js';
import { releaseMountPoints } from '../host/mount-ns.js';
import { cgroupTrees, hierarchies, removeCgroupTree, treePids } from '../host/node-cgroup.js';
import { restoreKubeletSysctls } from '../host/sysctls.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';

export interface DownOptions {
  log?: Logger;
  /** Keep the state directory (logs, kill logs) instead of removing it. */
  keepState?: boolean;
  clock?: Clock;
  /** Already holding the instance lock (labUp cleaning before it starts). */
  locked?: boolean;
}

export interface DownReport {
  instance: string;
  processes: number;
  netns: string[];
  links: string[];
  chains: string[];
  cgroups: string[];
  /** Mounts real nodes left (container rootfs, shm, pod network namespaces, volumes), unmounted. */
  mounts?: string[];
  stateDir?: string;
}

/**
 * Removes everything an instance made: its processes (found by network namespace, by cgroup and by their
 * command lines naming the state directory), cgroup, namespaces, veths, bridge, iptables chains and state.
 * Idempotent, and it works from names alone, so it also cleans after a crash or a half-finished `up`.
 */
export async function labDown(instance = 'lab', o: DownOptions = {}): Promise<DownReport> {
  if (o.locked) return down(instance, o);
  return withLock(join(machineRunDir(), `lab-${instance}.lock`), () => down(instance, o));
}

/**
 * How long the lab's processes get to stop on SIGTERM before they are killed. Everything they leave is removed next,
 * so a clean stop buys nothing but short logs' last lines: the apiserver's graceful shutdown (it drains its watches)
 * and etcd's would take 5 to 8 s of every real-node lab's `down` otherwise.
 */
const TERM_GRACE_MS = 2000;
/** How long SIGKILL is repeated for processes still found (a container's processes appear as the runtime dies). */
const KILL_WAIT_MS = 5000;

async function down(instance: string, o: DownOptions): Promise<DownReport> {
  const log = o.log ?? silentLogger;
  const clock = o.clock ?? realClock;
  const names = labNames(instance);
  const paths = labPaths(instance);
  const info = existsSync(paths.infoFile) ? await readLabInfoFile(paths.infoFile, instance).catch(() => undefined) : undefined;
  const stateDirs = [...new Set([paths.stateDir, info?.stateDir].filter((x): x is string => Boolean(x)))];
  const layout = cgroupLayout();
  const cgroups = [
    ...new Set([info?.etcdCgroup, layout ? join(layout.root, names.cgroup) : undefined].filter((x): x is string => Boolean(x))),
  ].filter((d) => existsSync(d));
  // real nodes: a cgroup tree per node in every hierarchy, and containerd's state and sockets under the run directory
  const runDir = instanceRunDir(instance);
  const trees = (await cgroupTrees(names.cgroupPrefix)).filter((d) => !cgroups.includes(d));
  const report: DownReport = {
    instance,
    processes: 0,
    netns: await listNetns(names.prefix),
    links: await listLinks(names.prefix),
    chains: await listChains(names.chainPrefix),
    cgroups: [...cgroups, ...trees],
  };

  const find = async () => {
    const pids = new Set<number>();
    for (const ns of await listNetns(names.prefix)) for (const p of await netnsPids(ns)) pids.add(p);
    for (const cg of cgroups) for (const p of await cgroupPids(cg)) pids.add(p);
    for (const t of trees) for (const p of await treePids(t)) pids.add(p);
    for (const p of await pidsNaming([...stateDirs, runDir].map((d) => `${d}/`))) pids.add(p);
    for (const a of await ancestors()) pids.delete(a);
    return [...pids].filter(alive);
  };
  const first = await find();
  report.processes = first.length;
  if (first.length) log.info(`stopping ${first.length} process(es) of lab ${instance}`);
  signalAll(first, 'SIGTERM');
  const graceEnds = clock.now() + TERM_GRACE_MS;
  while (clock.now() < graceEnds && (await find()).length) await clock.sleep(100);
  const killEnds = clock.now() + KILL_WAIT_MS;
  for (let left = await find(); left.length && clock.now() < killEnds; left = await find()) {
    signalAll(left, 'SIGKILL');
    await clock.sleep(100);
  }

  report.mounts = await unmountUnder([...stateDirs, runDir]);
  const stuck = await listMountsUnder([...stateDirs, runDir]);
  if (stuck.length)
    throw new KrError(
      'LAB_DOWN_INCOMPLETE',
      `could not unmount ${stuck.slice(0, 5).join(', ')}${stuck.length > 5 ? ` and ${stuck.length - 5} more` : ''}`,
    );
  for (const cg of cgroups) await removeCgroup(cg, clock);
  for (const t of trees) await removeCgroupTree(t, clock);
  const root = (await hierarchies())?.roots[0];
  const sysctls = root ? await restoreKubeletSysctls(machineRunDir(), root) : [];
  if (sysctls.length) log.info(`restored ${sysctls.join(', ')} (set by the real nodes' kubelets)`);
  await removeNet(names);
  // libcni's result cache: the real nodes' networks (named kr-<instance>-<node>) and containerd's loopback of each sandbox
  const sandboxes = await sandboxIds([...stateDirs.map((d) => join(d, 'nodes')), runDir]);
  const results = '/var/lib/cni/results';
  for (const f of await readdir(results).catch(() => [] as string[]))
    if (f.startsWith(names.prefix) || sandboxes.has(/^cni-loopback-([0-9a-f]{64})-lo$/.exec(f)?.[1] ?? ''))
      await rm(join(results, f), { force: true });
  await rm(runDir, { recursive: true, force: true });
  const mountPoints = await releaseMountPoints();
  if (mountPoints.length) log.info(`removed ${mountPoints.join(', ')} (the mount points of kubeadm labs' nodes)`);
  if (!o.keepState) {
    for (const d of stateDirs) {
      if (existsSync(d)) report.stateDir = d;
      await rm(d, { recursive: true, force: true });
    }
  }
  log.info(
    `lab ${instance} is down: ${report.processes} process(es), ${report.netns.length} namespace(s), ${report.links.length} link(s), ` +
      `${report.chains.length} chain(s), ${report.cgroups.length} cgroup(s)${report.mounts.length ? `, ${report.mounts.length} mount(s)` : ''} removed`,
  );
  return report;
}

/** Ids of the pod sandboxes real nodes' containerd made (`<node>/containerd/io.containerd.grpc.v1.cri/sandboxes/<id>`). */
async function sandboxIds(dirs: string[]): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const d of dirs)
    for (const node of await readdir(d).catch(() => [] as string[]))
      for (const id of await readdir(join(d, node, 'containerd', 'io.containerd.grpc.v1.cri', 'sandboxes')).catch(() => [] as string[]))
        ids.add(id);
  return ids;
}

function signalAll(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone meanwhile
    }
  }
}

/** This process and its ancestors (never stopped, even when their command line names the state directory). */
async function ancestors(): Promise<number[]> {
  const out = [process.pid];
  let pid = process.pid;
  for (let i = 0; i < 64 && pid > 1; i++) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!Number.isInteger(pid) || pid <= 0) break;
    out.push(pid);
  }
  return out;
}

/** Pids whose command line contains one of `needles` (the lab's components all name files in its state directory). */
async function pidsNaming(needles: string[]): Promise<number[]> {
  if (!needles.length) return [];
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmd && needles.some((n) => cmd.includes(n))) out.push(Number(entry));
  }
  return out;
}
