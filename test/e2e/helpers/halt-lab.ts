import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../../../src/core/clock.js';
import { shq } from '../../../src/core/shell.js';
import { runLeaseName } from '../../../src/nodes/agent-protocol.js';
import { AGENT_NS, agentInventory, applyAgentManifests } from './agents.js';
import { BIN } from './cli-lab.js';
import { untilJournalApplied, type AppliedFault } from './kills.js';
import { cli, type LabInfo, startLab } from './lab.js';
import { writeRunbookYaml } from './runbook-file.js';

/**
 * A lab whose workers are reached through node agents, for the halt's tests: its runs, the CLI's halt commands against
 * it, and its nodes' own state (iptables rules, the kubelet's process), read in each node's network namespace.
 */
export interface HaltLab {
  lab: LabInfo;
  /** The lab's inventory with its workers reached through agents. */
  inventory: string;
  /** The CLI's environment: a state directory of this lab's own, no colours. */
  env: NodeJS.ProcessEnv;
  work: string;
}

export async function startHaltLab(instance: string, nodes: number): Promise<HaltLab> {
  const lab = await startLab({ instance, nodes, workload: false });
  const inventory = agentInventory(lab);
  await applyAgentManifests(lab, inventory);
  const work = mkdtempSync(join(tmpdir(), `kr-e2e-${instance}-`));
  return { lab, inventory, work, env: { ...process.env, KUBE_RUNBOOK_STATE_DIR: join(work, 'state'), NO_COLOR: '1' } };
}

/** The faults the halt's runs hold: node-1..N-1's kubelet egress blocked (one step), node-N's kubelet stopped. */
export function haltRunbook(h: HaltLab, name: string, faultTtl: string, nodes: number): string {
  const cut = Array.from({ length: nodes - 1 }, (_, i) => `node-${i + 1}`).join(', ');
  return writeRunbookYaml(
    h.work,
    name,
    h.lab.context,
    `faultTtl: ${faultTtl}, maxUnavailable: {worker: ${nodes}}`,
    `    - {name: cut kubelets off, action: block-kubelet-egress, with: {nodes: {names: [${cut}]}}}
    - {name: stop a kubelet, action: stop-kubelet, with: {nodes: {names: [node-${nodes}]}}}
    - {name: hold, wait: 5m}
`,
  );
}

/** A `kube-runbook run` under way: its process, what it printed, its exit. */
export interface Run {
  child: ChildProcess;
  out(): string;
  exit: Promise<number | null>;
}

export function startRun(h: HaltLab, file: string, inventory = h.inventory): Run {
  const child = spawn(process.execPath, [BIN, 'run', file, '-i', inventory, '--yes', '-o', 'text'], {
    env: h.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, out: () => out, exit };
}

/** Resolves once the run's journal records `count` faults applied. */
export const applied = (run: Run, count: number) =>
  untilJournalApplied({ out: run.out, ended: () => run.child.exitCode !== null || run.child.signalCode !== null }, count, 180_000);

/** The CLI against the lab (`halt`, `resume`, `status`, `run`, `plan` ...), from a process of its own. */
export const cliOn = (h: HaltLab, args: string[]) =>
  cli([...args, '--kubeconfig', h.lab.kubeconfig, '--context', h.lab.context], { env: h.env, timeoutMs: 180_000 });
/** The CLI with the lab's own inventory (its kubeconfig and context). */
export const cliInv = (h: HaltLab, args: string[], inventory = h.lab.inventoryFile) =>
  cli([...args, '-i', inventory], { env: h.env, timeoutMs: 180_000 });

const netnsOf = (h: HaltLab, node: string) => h.lab.nodes.find((n) => n.name === node)!.netns;

/** A shell script's stdout, run in the node's network namespace (the lab's nodes share this machine's files). */
export function onNode(h: HaltLab, node: string) {
  return (script: string) =>
    new Promise<string>((resolve, reject) => {
      const c = spawn('ip', ['netns', 'exec', netnsOf(h, node), 'sh', '-c', script], {
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 30_000,
      });
      let out = '';
      c.stdout.on('data', (b: Buffer) => (out += b.toString()));
      c.on('close', (code, signal) => (signal ? reject(new Error(`on ${node}: killed by ${signal}`)) : resolve(out)));
    });
}

/** Whether the fault is in place now, as its node shows it: its iptables chain there, or its kubelet not running. */
export async function inPlace(h: HaltLab, f: Pick<AppliedFault, 'action' | 'node' | 'state'>): Promise<boolean> {
  if (f.action === 'block-kubelet-egress') return (await onNode(h, f.node!)('iptables -w 10 -S')).includes(String(f.state.chain));
  if (f.action === 'stop-kubelet') {
    const status = join(h.lab.stateDir, 'nodes', f.node!, 'kubelet', 'status');
    return (await onNode(h, f.node!)(`${shq(status)} >/dev/null 2>&1 && echo running || echo stopped`)).trim() === 'stopped';
  }
  throw new Error(`no check for ${f.action}`);
}

/**
 * Reads every fault from its node every 100 ms until none is in place or `timeoutMs` passes; when each was first seen
 * gone (epoch ms), absent for those still in place. `present` reads one from its node (`inPlace` by default).
 */
export async function revertTimes(
  h: HaltLab,
  faults: Pick<AppliedFault, 'faultId' | 'action' | 'node' | 'state'>[],
  timeoutMs: number,
  present: (f: Pick<AppliedFault, 'action' | 'node' | 'state'>) => Promise<boolean> = (f) => inPlace(h, f),
): Promise<Map<string, number>> {
  const gone = new Map<string, number>();
  const deadline = realClock.now() + timeoutMs;
  while (gone.size < faults.length && realClock.now() < deadline) {
    await Promise.all(
      faults.map(async (f) => {
        if (!gone.has(f.faultId) && !(await present(f))) gone.set(f.faultId, realClock.now());
      }),
    );
    await realClock.sleep(100);
  }
  return gone;
}

/**
 * The processes of this machine running an agent of `runId` (the simulated nodes run the agent's command for real, in
 * a few processes each: a shell, unshare, node), with the node each serves.
 */
export function agentProcesses(runId: string): { pid: number; node: string }[] {
  const cmd = (pid: string) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      return [];
    }
  };
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map((p) => ({ pid: Number(p), a: cmd(p) }))
    .filter(({ a }) => a.includes('agent') && a[a.indexOf('--run-id') + 1] === runId)
    .map(({ pid, a }) => ({ pid, node: a[a.indexOf('--node') + 1] ?? '' }));
}

/** When the executor last renewed the run Lease of `runId` (epoch ms), as the apiserver holds it. */
export async function runLeaseRenewedAt(h: HaltLab, runId: string): Promise<number> {
  const kc = new KubeConfig();
  kc.loadFromFile(h.lab.kubeconfig);
  const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: runLeaseName(runId), namespace: AGENT_NS });
  return new Date(lease.spec?.renewTime ?? 0).getTime();
}

/** "p50 1.2 s, p99 3.4 s, max 3.4 s (n 6)": the nearest-rank percentiles of `ms`. */
export function percentiles(ms: number[]): { p50: number; p99: number; max: number; text: string } {
  const s = [...ms].sort((a, b) => a - b);
  const rank = (p: number) => s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
  const [p50, p99, max] = [rank(50), rank(99), s.at(-1) ?? NaN];
  const f = (v: number) => `${(v / 1000).toFixed(2)} s`;
  return { p50, p99, max, text: `p50 ${f(p50)}, p99 ${f(p99)}, max ${f(max)} (n ${s.length})` };
}

/** The halt's time as its Lease records it (the `since` the CLI prints: the acquireTime it wrote), epoch ms. */
export function haltedAt(stdout: string): number {
  const since = /since (\S+) \(Lease/.exec(stdout)?.[1];
  if (!since) throw new Error(`no halt time in: ${stdout}`);
  return Date.parse(since);
}
