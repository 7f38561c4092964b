import { readFile } from 'node:fs/promises';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { sh } from '../host/host.js';
import type { LabNodeInfo } from '../host/info.js';

/**
 * What a real node's containerd holds: its pods' containers (not their sandboxes), read with `ctr` over the node's
 * own socket in the CRI's namespace `k8s.io`, each with its id, when containerd created it, and whether its task
 * runs (with the task's process and when the kernel started it). Ids and start times before and after a run say
 * which containers were killed or restarted, as the runtime saw it.
 */
export interface RealContainer {
  node: string;
  id: string;
  namespace: string;
  pod: string;
  podUid: string;
  container: string;
  createdAt: string;
  running: boolean;
  pid?: number;
  /** The task's process start (from /proc), when it runs. */
  startedAt?: string;
}

export interface RealRuntimeState {
  node: string;
  containers: RealContainer[];
}

const MARK = '#kr-container ';

/**
 * The shell text that prints `ctr tasks ls`, then each application container's `ctr containers info` after a mark
 * line. ctr is containerd's own client, built with it: no crictl is installed, and the CRI's labels are all ctr needs
 * to name a pod's container.
 */
function runtimeScript(ctr: string, socket: string): string {
  const c = `${shq(ctr)} --address ${shq(socket)} --namespace k8s.io --timeout 10s`;
  return `set -e
${c} tasks ls
for id in $(${c} containers ls -q 'labels."io.cri-containerd.kind"==container'); do
  printf '%s%s\\n' ${shq(MARK)} "$id"
  ${c} containers info "$id" || true
done
`;
}

interface CtrInfo {
  ID?: string;
  Labels?: Record<string, string>;
  CreatedAt?: string;
}

/** Parses what `runtimeScript` printed; `startOf(pid)` gives a running task's start time. */
export function parseRuntime(node: string, text: string, startOf: (pid: number) => string | undefined = () => undefined): RealRuntimeState {
  const [tasksText, ...infos] = text.split(MARK);
  const tasks = new Map<string, { pid: number; status: string }>();
  for (const line of (tasksText ?? '').split('\n').slice(1)) {
    const [id, pid, status] = line.trim().split(/\s+/);
    if (id && pid && status) tasks.set(id, { pid: Number(pid), status });
  }
  const containers: RealContainer[] = [];
  for (const chunk of infos) {
    const nl = chunk.indexOf('\n');
    const id = chunk.slice(0, nl).trim();
    let info: CtrInfo;
    try {
      info = JSON.parse(chunk.slice(nl + 1)) as CtrInfo;
    } catch {
      continue; // removed between the listing and its info
    }
    const l = info.Labels ?? {};
    const task = tasks.get(id);
    const running = task?.status === 'RUNNING';
    const startedAt = running ? startOf(task.pid) : undefined;
    containers.push({
      node,
      id,
      namespace: l['io.kubernetes.pod.namespace'] ?? '',
      pod: l['io.kubernetes.pod.name'] ?? '',
      podUid: l['io.kubernetes.pod.uid'] ?? '',
      container: l['io.kubernetes.container.name'] ?? '',
      createdAt: info.CreatedAt ?? '',
      running,
      ...(running ? { pid: task.pid } : {}),
      ...(startedAt ? { startedAt } : {}),
    });
  }
  return { node, containers: containers.sort((a, b) => a.id.localeCompare(b.id)) };
}

/** A real node's containers, from its containerd (`lab up` recorded where its ctr and socket are). */
export async function readRealRuntime(n: LabNodeInfo): Promise<RealRuntimeState> {
  if (!n.runtime)
    throw new KrError('LAB_REAL_NODE_RUNTIME', `${n.name} is not a real node of a lab that records its containerd (lab up again)`, {
      exit: EXIT.invalid,
    });
  const r = await sh(runtimeScript(n.runtime.ctr, n.runtime.socket), { timeoutMs: 60_000 });
  if (r.code !== 0)
    throw new KrError(
      'LAB_REAL_NODE_RUNTIME',
      `reading ${n.name}'s containerd failed: ${r.stderr.trim().split('\n').at(-1) ?? `exit ${r.code}`}`,
    );
  const boot = await bootTime();
  const stats = new Map<number, string>();
  for (const m of r.stdout.matchAll(/^(\S+)\s+(\d+)\s+RUNNING\s*$/gm)) {
    const stat = await readFile(`/proc/${m[2]}/stat`, 'utf8').catch(() => '');
    if (stat) stats.set(Number(m[2]), stat);
  }
  return parseRuntime(n.name, r.stdout, (pid) => processStart(stats.get(pid), boot));
}

/** Clock ticks a second of /proc/PID/stat's start time: USER_HZ, 100 on every Linux architecture the lab runs on. */
const USER_HZ = 100;

async function bootTime(): Promise<number> {
  const m = /^btime (\d+)$/m.exec(await readFile('/proc/stat', 'utf8').catch(() => ''));
  return m ? Number(m[1]) : 0;
}

/** A process's start time from its /proc/PID/stat line (field 22, after the command in parentheses). */
export function processStart(stat: string | undefined, bootSeconds: number): string | undefined {
  if (!stat || !bootSeconds) return undefined;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[19]);
  return Number.isFinite(ticks) ? new Date(bootSeconds * 1000 + (ticks * 1000) / USER_HZ).toISOString() : undefined;
}

export interface RuntimeChange {
  /** Running before, not running (stopped or removed) after. */
  killed: (RealContainer & { restarted: boolean })[];
  /** Running after, not before: replacements and restarts. */
  started: RealContainer[];
}

/** Whether `other` (the same container in the other reading) runs the same task as running `c`: not stopped, not started anew. */
function sameRun(c: RealContainer, other: RealContainer | undefined): boolean {
  return other?.running === true && !(c.startedAt !== undefined && other.startedAt !== undefined && c.startedAt !== other.startedAt);
}

/**
 * What changed between two readings of the same nodes: a container that ran before and no longer runs (or whose
 * task started anew) was killed; it was restarted when its pod (same uid) runs a container of that name again.
 */
export function runtimeChange(before: RealRuntimeState[], after: RealRuntimeState[]): RuntimeChange {
  const key = (c: RealContainer) => `${c.node}/${c.id}`;
  const now = new Map(after.flatMap((s) => s.containers).map((c) => [key(c), c]));
  const was = new Map(before.flatMap((s) => s.containers).map((c) => [key(c), c]));
  const runningAfter = [...now.values()].filter((c) => c.running);
  const killed = [...was.values()]
    .filter((c) => c.running && !sameRun(c, now.get(key(c))))
    .map((c) => ({
      ...c,
      restarted: runningAfter.some(
        (a) => a.podUid === c.podUid && a.container === c.container && (a.id !== c.id || a.startedAt !== c.startedAt),
      ),
    }));
  const started = runningAfter.filter((a) => !sameRun(a, was.get(key(a))));
  return { killed, started };
}
