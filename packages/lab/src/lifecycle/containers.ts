import { EXIT, KrError, messageOf, quote } from 'kube-runbook/internal/core/errors.js';
import type { LabInfo, LabNodeInfo } from '../host/info.js';
import { readRuntime, type RuntimeState } from '../sim/runtime.js';
import { readRealRuntime, type RealContainer } from './real-runtime.js';

/** A real node's containers as its containerd holds them; `error` when it could not be read (containerd down). */
export interface RealNodeContainers {
  node: string;
  runtime: 'containerd';
  containers: RealContainer[];
  error?: string;
}

export type NodeContainers = RuntimeState | RealNodeContainers;

/** The nodes whose containers `lab containers` shows: every worker, and every node with a containerd (cp-1 with --static-pods). */
const shown = (info: LabInfo): LabNodeInfo[] => info.nodes.filter((n) => n.roles.includes('worker') || n.runtime);

/** A real node's containers; a containerd that does not answer is said, not thrown, so the other nodes still show. */
export async function realNodeContainers(n: LabNodeInfo): Promise<RealNodeContainers> {
  try {
    return { node: n.name, runtime: 'containerd', containers: (await readRealRuntime(n)).containers };
  } catch (e) {
    return { node: n.name, runtime: 'containerd', containers: [], error: messageOf(e) };
  }
}

/** The containers of one node (`node`) or of every node shown: the simulator's for simulated nodes, containerd's for real ones. */
export async function labContainers(info: LabInfo, node?: string): Promise<NodeContainers[]> {
  const nodes = shown(info);
  if (node !== undefined && !nodes.some((n) => n.name === node))
    throw new KrError(
      'LAB_BAD_NODE',
      `no node ${quote(node)} with containers in lab ${info.instance} (nodes: ${nodes.map((n) => n.name).join(', ')})`,
      { exit: EXIT.invalid },
    );
  return Promise.all(
    nodes
      .filter((n) => node === undefined || n.name === node)
      .map((n) => (n.real || n.runtime ? realNodeContainers(n) : readRuntime(info.stateDir, n.name))),
  );
}

const isReal = (s: NodeContainers): s is RealNodeContainers => 'runtime' in s;
/** A container id as crictl and `kubectl describe` shorten it. */
const shortId = (id: string) => id.slice(0, 13);

/** One line per real container: pod, container, id, state and since when (its process's start, else its creation). */
export function realContainerLines(s: RealNodeContainers, indent: string): string[] {
  if (s.error) return [`${indent}(containerd unreadable: ${s.error})`];
  if (!s.containers.length) return [`${indent}(no containers)`];
  return s.containers.map(
    (c) =>
      `${indent}${(c.running ? 'running' : 'exited').padEnd(8)} ${c.namespace}/${c.pod} ${c.container} ${shortId(c.id)} ${c.running ? `since ${c.startedAt ?? c.createdAt}` : `created ${c.createdAt}`}`,
  );
}

/** Text of `lab containers`. */
export function renderContainers(states: NodeContainers[]): string {
  const lines: string[] = [];
  for (const s of states) {
    if (isReal(s)) {
      const running = s.containers.filter((c) => c.running).length;
      lines.push(`${s.node}: ${running} running, ${s.containers.length - running} exited (containerd)`, ...realContainerLines(s, '  '));
      continue;
    }
    lines.push(`${s.node}: ${s.containers.length} running, ${s.kills.length} killed`);
    for (const c of s.containers) lines.push(`  running  ${c.namespace}/${c.pod} ${c.container} ${c.podIp} since ${c.startedAt}`);
    for (const k of s.kills) lines.push(`  killed   ${k.at} ${k.namespace}/${k.pod} ${k.container}: ${k.reason}`);
  }
  return lines.join('\n');
}
