import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { BOOT_ROOT } from 'kube-runbook/internal/nodes/boot-dir.js';
import { run, sh } from '../host/host.js';
import { readLabInfo, writeLabInfo, type LabInfo, type LabNodeInfo } from '../host/info.js';
import { bootSystemdNode, killLeftoverSystemdNode } from '../host/systemd-node.js';
import { systemdNodeOf } from './up-systemd-nodes.js';
import { systemdNodeSocket } from './systemd-node-units.js';
import { netnsPids } from '../host/net.js';
import { instanceRunDir, labNames, labPaths } from '../host/paths.js';
import { unmountUnder } from '../host/mounts.js';
import { inNode, mountNsFile, remakeNodeMountNs } from '../host/mount-ns.js';
import { cgroupTrees, treePids } from '../host/node-cgroup.js';
import { killUntilGone } from '../host/cgroup.js';
import { rm } from 'node:fs/promises';

export interface RebootOptions {
  log?: Logger;
  clock?: Clock;
  /** Where the boot step finds the node's boot scripts (tests). */
  bootRoot?: string;
}

export interface RebootReport {
  node: string;
  /** Processes of the node killed, as a power cut would. */
  killed: number;
  /** Services the node started at boot (those not stopped with `stop`). */
  started: string[];
  /** Services left down: stopped before the reboot, as a parked static-pod manifest stays parked. */
  down: string[];
  /** Boot scripts run (the dead-men's boot hooks). */
  bootScripts: string[];
}

/**
 * A lab node's reboot, as the node would go through one: every process in its network namespace killed at once
 * (no stop scripts, no clean shutdown: the dead-men's watchers die too), then its boot step: each of its services
 * started unless it was stopped (its `down` mark, which `stop` leaves and `start` clears), and every script in
 * its boot directory run in its namespace, detached, as a node's init would run an enabled unit.
 *
 * What it does not do: a real reboot also loses the node's firewall rules and cgroup limits; here they stay until
 * a revert removes them (the boot scripts run the same reverts, so the end state is the same).
 */
export async function rebootLabNode(instance: string, node: string, o: RebootOptions = {}): Promise<RebootReport> {
  const log = o.log ?? silentLogger;
  const clock = o.clock ?? realClock;
  const info = await readLabInfo(instance);
  const n = info.nodes.find((x) => x.name === node);
  if (!n)
    throw new KrError('LAB_BAD_NODE', `no node ${quote(node)} in lab ${instance} (nodes: ${info.nodes.map((x) => x.name).join(', ')})`, {
      exit: EXIT.invalid,
    });

  if (n.systemd) return rebootSystemdNode(info, n, { log, clock });
  let killed = await killUntilGone(() => netnsPids(n.netns), clock);
  if (n.real) killed += await powerCutRealNode(instance, node, clock);
  log.info(`lab: ${node} lost power: ${killed} process(es) killed`);

  const nodeDir = join(labPaths(instance).nodesDir, node);
  const started: string[] = [];
  const down: string[] = [];
  for (const service of (await readdir(nodeDir, { withFileTypes: true }).catch(() => []))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()) {
    const dir = join(nodeDir, service);
    if (!existsSync(join(dir, 'start'))) continue;
    if (existsSync(join(dir, 'down'))) {
      down.push(service);
      continue;
    }
    const r = await run(join(dir, 'start'), []);
    if (r.code !== 0)
      throw new KrError('LAB_START_FAILED', `${node}: ${service} did not start at boot (exit ${r.code}): ${r.stderr.trim()}`);
    started.push(service);
  }

  const bootDir = join(o.bootRoot ?? BOOT_ROOT, n.netns);
  const bootScripts = (await readdir(bootDir).catch(() => [] as string[])).sort();
  // a kubeadm node's scripts run in its mount namespace too (remade by the power cut), as its transport runs them
  const mountNs = mountNsFile(instance, node);
  for (const s of bootScripts) {
    const argv = ['/bin/sh', join(bootDir, s)];
    const inside = existsSync(mountNs) ? inNode(n.netns, mountNs, argv) : `ip netns exec ${shq(n.netns)} ${argv.map(shq).join(' ')}`;
    const r = await sh(`setsid ${inside} </dev/null >/dev/null 2>&1 &\n`);
    if (r.code !== 0) throw new KrError('LAB_BOOT_FAILED', `${node}: boot script ${s} did not start: ${r.stderr.trim()}`);
  }
  log.info(
    `lab: ${node} booted: started ${started.join(', ') || 'nothing'}; down ${down.join(', ') || 'nothing'}; ${bootScripts.length} boot script(s)`,
  );
  return { node, killed, started, down, bootScripts };
}

/**
 * What else a power cut takes from a real node: its containers (in pods' network namespaces, not the node's) and
 * shims, found by the node's cgroup tree; its mounts; and its run directory (tmpfs on a node): containerd's state,
 * sockets and runc's state. Its containerd root (images, snapshots) and the kubelet's root stay, as disks do.
 */
async function powerCutRealNode(instance: string, node: string, clock: Clock): Promise<number> {
  const name = labNames(instance).nodeCgroup(node);
  const trees = (await cgroupTrees(name)).filter((d) => basename(d) === name);
  const killed = await killUntilGone(async () => (await Promise.all(trees.map(treePids))).flat(), clock);
  const runDir = join(instanceRunDir(instance), node);
  await unmountUnder([runDir, join(labPaths(instance).nodesDir, node)]);
  await rm(runDir, { recursive: true, force: true });
  await remakeNodeMountNs(instance, node, join(labPaths(instance).nodesDir, node));
  return killed;
}

/**
 * A node whose PID 1 is systemd loses power (every process of its cgroup killed, its /run with it) and boots again
 * on the same disk (its overlay's `upper`): systemd starts the units enabled there, the dead-men's boot units
 * among them, as on a machine. Its new PID 1 is recorded in the lab's state.
 */
async function rebootSystemdNode(info: LabInfo, n: LabNodeInfo, o: { log: Logger; clock: Clock }): Promise<RebootReport> {
  const node = systemdNodeOf(info.instance, n);
  const killed = await killLeftoverSystemdNode(node.cgroup, o);
  o.log.info(`lab: ${n.name} lost power: ${killed} process(es) killed`);
  const pid = await bootSystemdNode(node, o);
  n.systemd = { ...n.systemd!, pid };
  if (n.runtime) n.runtime = { ...n.runtime, socket: systemdNodeSocket(pid) };
  await writeLabInfo(info);
  o.log.info(`lab: ${n.name} booted: systemd is PID ${pid} (its enabled units start as on a machine)`);
  return { node: n.name, killed, started: ['systemd'], down: [], bootScripts: [] };
}
