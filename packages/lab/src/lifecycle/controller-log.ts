import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { LabInfo } from '../host/info.js';
import { runtimePathsOf } from '../host/paths.js';
import { klogTimeMs, parseKlogLine, taintEvictedPod } from 'kube-runbook/internal/nodes/services/klog.js';

/** A pod the controller-manager says it deleted for a NoExecute taint, at the time its log line carries. */
export interface LoggedEviction {
  /** namespace/name */
  pod: string;
  at: string;
  /** The control-plane node whose controller-manager logged it. */
  from: string;
}

/**
 * The evictions in a controller-manager's log text from `sinceMs` on (each at its line's time, `klogTimeMs`).
 */
export function parseEvictions(text: string, sinceMs: number, from: string): LoggedEviction[] {
  const out: LoggedEviction[] = [];
  for (const line of text.split('\n')) {
    const l = parseKlogLine(line);
    if (l?.severity !== 'I') continue;
    const pod = taintEvictedPod(l.message);
    if (!pod) continue;
    const at = klogTimeMs(l, sinceMs);
    if (at >= sinceMs) out.push({ pod, at: new Date(at).toISOString(), from });
  }
  return out;
}

/**
 * The pods the lab's controller-managers say they evicted since `sinceMs`, read from each control-plane node's
 * kube-controller-manager log (an HA lab has three; the leader evicts). A missing log is an error, never "none
 * evicted": the count must come from the controller, not from whoever watched.
 */
export async function controllerEvictions(lab: LabInfo, sinceMs: number): Promise<LoggedEviction[]> {
  const paths = runtimePathsOf(lab.instance, lab.stateDir);
  const members = lab.nodes.filter((n) => n.roles.includes('control-plane'));
  if (!members.length) throw new Error(`lab ${lab.instance} has no control-plane node whose controller-manager log could be read`);
  const found = await Promise.all(
    members.map(async (n) => {
      const file = join(paths.serviceDir(n.name, 'kube-controller-manager'), 'log');
      const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
        throw new Error(`the controller-manager's log ${file} cannot be read (${e.code ?? e.message}): evictions cannot be counted`);
      });
      return parseEvictions(text, sinceMs, n.name);
    }),
  );
  return found.flat().sort((a, b) => a.at.localeCompare(b.at));
}
