/**
 * Labs for end-to-end tests: `startLab` installs the binaries when they are missing (cached: instant; fresh:
 * about 8 minutes of build), removes whatever an earlier run of the same instance left, and starts the lab;
 * `stopLab` removes everything. `leftovers` says, the way a person would look, what of an instance remains.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../../../src/core/clock.js';
import { createLogger } from '../../../src/core/logger.js';
import { ensureLabBinaries, labDown, labNames, labPaths, labUp, type LabInfo, type LabUpOptions } from '../../../packages/lab/src/index.js';
import { instanceRunDir } from '../../../packages/lab/src/host/paths.js';
import { routeOf } from '../../../packages/lab/src/install/binaries.js';

export type { LabInfo };

export interface StartLabOptions extends LabUpOptions {
  instance: string;
}

const log = createLogger((level, msg) => process.stderr.write(`[lab] ${level === 'info' ? '' : `${level}: `}${msg}\n`));

/**
 * The Kubernetes release these tests run against: `KUBE_RUNBOOK_LAB_VERSION` (each e2e project of
 * vitest.config.ts sets it and names itself after it), else the lab's default.
 */
export const LAB_VERSION = process.env.KUBE_RUNBOOK_LAB_VERSION ?? '1.37';

/**
 * Whether LAB_VERSION's kubelet runs on real nodes (containerd 2): 1.37 and 1.34, built from the Go module proxy;
 * 1.20's, from Debian's source package, does not, and its labs use simulated nodes.
 */
export const REAL_NODES = routeOf(Number(LAB_VERSION.split('.')[1])) === 'go-modules';

/** `count` worker nodes, real ones where the release supports them (REAL_NODES), else simulated. */
export const workerNodes = (count: number): { nodes: number; realNodes?: number } =>
  REAL_NODES ? { nodes: 0, realNodes: count } : { nodes: count };

/**
 * A lab instance name for this suite's release: the default release's as given, another release's with its minor
 * number appended (`inc` → `inc34`), so that the releases' suites can run side by side. Names
 * given here are at most 4 characters (an instance name has 6).
 */
export const instanceFor = (base: string): string =>
  process.env.KUBE_RUNBOOK_LAB_VERSION && LAB_VERSION !== '1.37' ? `${base}${LAB_VERSION.split('.')[1]}` : base;

/** The binaries of LAB_VERSION, built into the cache when missing. */
export const labBinaries = () => ensureLabBinaries({ log, kubernetesVersion: LAB_VERSION });

export async function startLab(o: StartLabOptions): Promise<LabInfo> {
  const binaries = await labBinaries();
  await labDown(o.instance);
  return labUp({ ...o, binaries, log });
}

export async function stopLab(instance: string): Promise<void> {
  await labDown(instance);
}

/** The core API of a lab, as its admin. */
export function coreApi(lab: LabInfo): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  return kc.makeApiClient(CoreV1Api);
}

export const REPO = fileURLToPath(new URL('../../..', import.meta.url));

/** The lab's CLI in the workspace (packages/lab): `kube-runbook-lab up`, `status`, `env`, `demo` ... */
export const LAB_BIN = join(REPO, 'packages', 'lab', 'bin', 'kube-runbook-lab.js');

type CliResult = { code: number | null; stdout: string; stderr: string };

/** Runs the built CLI (`npm run build` first) with Node 24; resolves with its exit code and output. */
export function cli(args: string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  return runBin(join(REPO, 'bin', 'kube-runbook.js'), args, o);
}

/** Runs the built lab CLI (LAB_BIN) as `cli` runs the product's. */
export function labCli(args: string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  return runBin(LAB_BIN, args, o);
}

function runBin(bin: string, args: string[], o: { env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: o.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const cancel = realClock.setTimer(o.timeoutMs ?? 180_000, () => child.kill('SIGKILL'));
    child.on('close', (code) => {
      cancel();
      resolve({ code, stdout, stderr });
    });
  });
}

/** Waits for `cond`, polling; returns the milliseconds it took (the tests' one wait, src/testing/wait.ts). */
export { waitFor as until } from '../../../src/testing/wait.js';

/**
 * What of an instance is still on this machine: network namespaces, links, iptables chains and rules, the
 * etcd cgroup, processes with the instance's state directory on their command line (every member's etcd and
 * control plane, HAProxy of an HA lab), HAProxy processes holding the VIP's namespace, and the state directory;
 * for real nodes also their cgroups in every hierarchy, processes in them, their mounts, the run directory and
 * libcni's cached results of their networks.
 */
export async function leftovers(instance: string): Promise<string[]> {
  const names = labNames(instance);
  const paths = labPaths(instance);
  const out: string[] = [];
  const sh = (cmd: string, args: string[]) => runText(cmd, args);
  for (const l of (await sh('ip', ['netns', 'list'])).split('\n')) if (l.startsWith(names.prefix)) out.push(`netns ${l.split(' ')[0]}`);
  for (const l of (await sh('ip', ['-o', 'link', 'show'])).split('\n')) {
    const name = /^\d+:\s+([^:@\s]+)/.exec(l)?.[1];
    if (name?.startsWith(names.prefix)) out.push(`link ${name}`);
  }
  for (const l of (await sh('iptables', ['-w', '-S'])).split('\n')) if (l.includes(names.chainPrefix)) out.push(`iptables ${l}`);
  for (const root of ['/sys/fs/cgroup/blkio', '/sys/fs/cgroup'])
    if (existsSync(join(root, names.cgroup))) out.push(`cgroup ${join(root, names.cgroup)}`);
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmd.includes(`${paths.stateDir}/`) && Number(pid) !== process.pid)
      out.push(`process ${pid} ${cmd.replace(/\0/g, ' ').slice(0, 120)}`);
  }
  // a process keeps its network namespace alive after `ip netns del`: an HA lab's HAProxy must not survive in one
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    const comm = (() => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        return '';
      }
    })();
    if (comm !== 'haproxy') continue;
    const ns = (await runText('ip', ['netns', 'identify', pid])).trim();
    if (ns.startsWith(names.prefix)) out.push(`haproxy ${pid} in ${ns}`);
  }
  if (existsSync(paths.stateDir)) out.push(`state ${paths.stateDir}`);
  out.push(...realNodeLeftovers(instance));
  return out;
}

function realNodeLeftovers(instance: string): string[] {
  const names = labNames(instance);
  const paths = labPaths(instance);
  const runDir = instanceRunDir(instance);
  const out: string[] = [];
  const ls = (d: string) => (existsSync(d) ? readdirSync(d) : []);
  const read = (f: string) => {
    try {
      return readFileSync(f, 'utf8');
    } catch {
      return '';
    }
  };
  for (const h of ls('/sys/fs/cgroup'))
    for (const n of ls(join('/sys/fs/cgroup', h))) if (n.startsWith(names.cgroupPrefix)) out.push(`cgroup ${join('/sys/fs/cgroup', h, n)}`);
  for (const n of ls('/sys/fs/cgroup')) if (n.startsWith(names.cgroupPrefix)) out.push(`cgroup ${join('/sys/fs/cgroup', n)}`);
  for (const pid of ls('/proc').filter((p) => /^\d+$/.test(p))) {
    const cmd = read(`/proc/${pid}/cmdline`);
    if (cmd.includes(`${runDir}/`)) out.push(`process ${pid} ${cmd.replace(/\0/g, ' ').slice(0, 120)}`);
    // a zombie (killed, not yet reaped by PID 1) still names the cgroup it died in, which is gone
    else if (read(`/proc/${pid}/cgroup`).includes(`/${names.cgroupPrefix}`) && !/^\S+ \(.*\) Z /.test(read(`/proc/${pid}/stat`)))
      out.push(`process ${pid} in a cgroup of the lab`);
  }
  for (const line of read('/proc/self/mountinfo').split('\n')) {
    const m = line.split(' ')[4];
    if (m && (m.startsWith(`${paths.stateDir}/`) || m.startsWith(`${runDir}/`))) out.push(`mount ${m}`);
  }
  if (existsSync(runDir)) out.push(`run ${runDir}`);
  for (const f of ls('/var/lib/cni/results')) if (f.startsWith(names.prefix)) out.push(`cni ${f}`);
  return out;
}

function runText(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let text = '';
    child.stdout.on('data', (b: Buffer) => (text += b.toString()));
    child.on('close', () => resolve(text));
    child.on('error', () => resolve(''));
  });
}

/** Runs a POSIX sh script inside a node's network namespace, as the netns transport does (script on stdin). */
export function inNetns(netns: string, script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', netns, 'sh', '-s'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(script);
  });
}

/** What a person reads first when a run did not end as expected: its reason, the step that failed, the guards that fired. */
export function whyRun(o: {
  exitCode: number;
  report: {
    reason: string;
    steps: { index: string; name: string; status?: string; detail?: string }[];
    guardFirings: { at: string; guard: string; response: string; detail: string }[];
  };
}): string {
  const failed = o.report.steps.filter((s) => s.status && s.status !== 'passed' && s.status !== 'skipped');
  return [
    `exit ${o.exitCode}: ${o.report.reason}`,
    ...failed.map((s) => `step ${s.index} ${s.name}: ${s.status} — ${s.detail ?? ''}`),
    ...o.report.guardFirings.map((g) => `guard ${g.guard} ${g.response} at ${g.at}: ${g.detail}`),
  ].join('\n');
}
