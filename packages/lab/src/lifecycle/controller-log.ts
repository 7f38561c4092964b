import { readdir, readFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import type { LabInfo } from '../host/info.js';
import { runtimePathsOf } from '../host/paths.js';
import { klogTimeMs, parseKlogLine, taintEvictedPod, type KlogLine } from 'kube-runbook/internal/nodes/services/klog.js';

/** A pod the controller-manager says it deleted for a NoExecute taint, at the time its log line carries. */
export interface LoggedEviction {
  /** namespace/name */
  pod: string;
  at: string;
  /** The control-plane node whose controller-manager logged it. */
  from: string;
}

/** One line of a controller-manager's log: klog's, at the moment it was written (ms). */
export interface ControllerLogLine {
  at: number;
  line: KlogLine;
}

/** The klog lines of a controller-manager's own log text, each at its header's time (`klogTimeMs`, near `refMs`). */
export function klogLines(text: string, refMs: number): ControllerLogLine[] {
  const out: ControllerLogLine[] = [];
  for (const raw of text.split('\n')) {
    const line = parseKlogLine(raw);
    if (line) out.push({ at: klogTimeMs(line, refMs), line });
  }
  return out;
}

/**
 * The klog lines of a static pod's container log (the CRI format the kubelet writes: `<RFC 3339 time> <stream> <P|F>
 * <text>`, a line cut in parts marked P), each at the time the kubelet stamped (a zone it names, unlike klog's local
 * time, which is the container's).
 */
export function criKlogLines(text: string): ControllerLogLine[] {
  const out: ControllerLogLine[] = [];
  let partial = '';
  for (const raw of text.split('\n')) {
    const m = /^(\S+) (?:stdout|stderr) ([PF]) (.*)$/.exec(raw);
    if (!m) continue;
    if (m[2] === 'P') {
      partial += m[3];
      continue;
    }
    const line = parseKlogLine(partial + m[3]!);
    partial = '';
    if (line) out.push({ at: Date.parse(m[1]!), line });
  }
  return out;
}

/** The evictions among a controller-manager's log lines from `sinceMs` on. */
export function evictionsIn(lines: ControllerLogLine[], sinceMs: number, from: string): LoggedEviction[] {
  const out: LoggedEviction[] = [];
  for (const { at, line } of lines) {
    const pod = line.severity === 'I' ? taintEvictedPod(line.message) : undefined;
    if (pod && at >= sinceMs) out.push({ pod, at: new Date(at).toISOString(), from });
  }
  return out;
}

/**
 * A control-plane node's controller-manager log, in the order it was written: the lab's own service log, else (a
 * control plane of static pods, `--static-pods` or `--kubeadm`) every log the kubelet kept of the
 * kube-controller-manager container, across restarts, rotations and manifest edits (each edit is a new pod UID, so a
 * new directory). Neither: an error, never an empty log. `refMs` gives klog's headers their year.
 */
export async function controllerManagerLog(lab: LabInfo, node: string, refMs: number): Promise<ControllerLogLine[]> {
  const file = join(runtimePathsOf(lab.instance, lab.stateDir).serviceDir(node, 'kube-controller-manager'), 'log');
  const text = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? undefined : Promise.reject(e)));
  if (text !== undefined) return klogLines(text, refMs);
  const podLogs = join(lab.stateDir, 'nodes', node, 'pod-logs');
  const pods = (await readdir(podLogs).catch(() => [] as string[])).filter((d) =>
    d.startsWith(`kube-system_kube-controller-manager-${node}_`),
  );
  const files = (
    await Promise.all(
      pods.map(async (d) => {
        const dir = join(podLogs, d, 'kube-controller-manager');
        return (await readdir(dir).catch(() => [] as string[]))
          .filter((f) => /^\d+\.log(?:\.\d{8}-\d{6}(?:\.gz)?)?$/.test(f))
          .map((f) => join(dir, f));
      }),
    )
  ).flat();
  if (!files.length)
    throw new Error(
      `the controller-manager's log ${file} cannot be read (ENOENT), nor a kube-controller-manager container log under ${podLogs}`,
    );
  // the kubelet rotates a container's log (`0.log.20261202-075600`) and compresses the older ones
  const read = async (f: string) => (f.endsWith('.gz') ? gunzipSync(await readFile(f)).toString('utf8') : readFile(f, 'utf8'));
  const lines = (await Promise.all(files.map(async (f) => criKlogLines(await read(f))))).flat();
  // stable: the lines of one file keep their order within a moment
  return lines.sort((a, b) => a.at - b.at);
}

async function evictionsOf(lab: LabInfo, node: string, sinceMs: number): Promise<LoggedEviction[]> {
  const lines = await controllerManagerLog(lab, node, sinceMs).catch((e: Error) =>
    Promise.reject(new Error(`${e.message}: evictions cannot be counted`)),
  );
  return evictionsIn(lines, sinceMs, node);
}

/**
 * The pods the lab's controller-managers say they evicted since `sinceMs`, read from each control-plane node's
 * kube-controller-manager log (an HA lab has three; the leader evicts). A missing log is an error, never "none
 * evicted": the count must come from the controller, not from whoever watched.
 */
export async function controllerEvictions(lab: LabInfo, sinceMs: number): Promise<LoggedEviction[]> {
  const members = lab.nodes.filter((n) => n.roles.includes('control-plane'));
  if (!members.length) throw new Error(`lab ${lab.instance} has no control-plane node whose controller-manager log could be read`);
  const found = await Promise.all(members.map((n) => evictionsOf(lab, n.name, sinceMs)));
  return found.flat().sort((a, b) => a.at.localeCompare(b.at));
}
