import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import type { LabBinariesInfo } from '../host/info.js';
import { routeOf } from '../install/binaries.js';
import { ensureRealNodeBinaries } from '../install/real-nodes.js';
import { realNodeProblems, type MachineFacts } from './real-nodes.js';

export type NodeChoice = { real: true } | { real: false; reason: string };

/**
 * Whether this machine can run real nodes for a lab of `bin`'s release, by the checks `lab up --real-nodes` makes
 * (root on Linux, a release whose kubelet runs on containerd 2, cgroup controllers, overlayfs, nsenter and umount),
 * then by having their binaries: installed or built once into the cache. Otherwise the reason, in one clause.
 */
export async function chooseNodes(
  bin: LabBinariesInfo,
  o: { log?: Logger; signal?: AbortSignal; machine?: MachineFacts; uid?: number } = {},
): Promise<NodeChoice> {
  const uid = o.uid ?? process.getuid?.();
  if (process.platform !== 'linux' || uid !== 0) return { real: false, reason: 'real nodes need root on Linux' };
  if (routeOf(Number(bin.version.split('.')[1])) === 'debian')
    return { real: false, reason: `Kubernetes ${bin.version}'s kubelet does not run on containerd 2 (real nodes run on 1.37 and 1.34)` };
  const problems = await realNodeProblems(o.machine);
  if (problems.length) return { real: false, reason: `real nodes need ${problems.join(', ')}` };
  try {
    await ensureRealNodeBinaries({ log: o.log ?? silentLogger, signal: o.signal }, bin);
  } catch (e) {
    return { real: false, reason: `real nodes' binaries could not be installed: ${messageOf(e)}` };
  }
  return { real: true };
}
