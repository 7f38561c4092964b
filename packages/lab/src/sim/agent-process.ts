import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import type { EnvVar, PodLite } from './types.js';

/** Where in-cluster clients read the pod's ServiceAccount. */
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** A container that exited is started again after this long (a kubelet's first CrashLoopBackOff step). */
const RESTART_MS = 10_000;

/** How a process container stands, for the pod's status. */
export type ProcessState =
  | { kind: 'running' }
  | { kind: 'exited'; exitCode: number; message: string; restarts: number }
  /** Exited and not to be started again (exit 0 under restartPolicy OnFailure, any exit under Never): the pod ends. */
  | { kind: 'ended'; exitCode: number; message: string; restarts: number }
  | { kind: 'image'; reason: string; message: string }
  /** Not started yet: its ServiceAccount token could not be had (the apiserver away, or not yet aware of the pod). */
  | { kind: 'creating'; message: string };

export interface AgentProcessOptions {
  /** The image whose pods run for real. Another tag of its repository "cannot be pulled": the lab has only this one. */
  image: string;
  /** What `kube-runbook` is: node and the CLI's script. */
  cli: string[];
  /** Per pod: the ServiceAccount files, the log, the pid. */
  dir: string;
  server: URL;
  ca: string;
  token(namespace: string, serviceAccount: string, pod: { name: string; uid: string }): Promise<string>;
  /** A Secret's key, decoded, for the container's environment (`valueFrom.secretKeyRef`). */
  secretKey(namespace: string, name: string, key: string): Promise<string>;
  clock: Clock;
  log: Logger;
  /**
   * The node's network namespace (a name under /run/netns), entered with `nsenter --net` when the simulator runs
   * outside it (one process simulating many nodes); absent: the process's own.
   */
  netns?: string;
}

interface Tracked {
  pod: PodLite;
  pid?: number;
  state: ProcessState;
  restarts: number;
  cancel?: () => void;
}

/**
 * The lab's stand-in for a container runtime running a real program: for pods of the agent image, the container's
 * command runs as a process of this node (in its network namespace, the lab's host), in a session of its own (so a
 * stopped kubelet leaves it running, as a real runtime does), in a private mount namespace where the pod's
 * ServiceAccount token, the cluster's CA and the namespace are bound where in-cluster clients read them. Its exit is
 * reported as a real kubelet would (CrashLoopBackOff with the last words of its log) and it is started again after
 * RESTART_MS; deleting the pod kills it.
 */
export class AgentProcesses {
  private readonly tracked = new Map<string, Tracked>();
  /** Told when the state of a pod's process changed: its status is to be reported again (the pod worker sets it). */
  onChange: (podUid: string) => void = () => {};

  constructor(private readonly o: AgentProcessOptions) {}

  /** Pods this runner runs: the first container's image is the agent's, or another tag of its repository. */
  handles(pod: PodLite): boolean {
    const image = pod.spec?.containers?.[0]?.image ?? '';
    return image === this.o.image || repository(image) === repository(this.o.image);
  }

  state(podUid: string): ProcessState | undefined {
    return this.tracked.get(podUid)?.state;
  }

  /** Starts the pod's process (or reports the image missing); a process already running for it is adopted. */
  async start(pod: PodLite): Promise<void> {
    const uid = pod.metadata.uid ?? '';
    if (this.tracked.has(uid)) return;
    const t: Tracked = { pod, state: { kind: 'running' }, restarts: 0 };
    this.tracked.set(uid, t);
    const image = pod.spec?.containers?.[0]?.image ?? '';
    if (image !== this.o.image) {
      t.state = {
        kind: 'image',
        reason: 'ErrImagePull',
        message: `manifest unknown: the lab's registry has ${this.o.image} only (not ${image})`,
      };
      return;
    }
    const dir = join(this.o.dir, uid);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(join(dir, 'pod.json'), JSON.stringify(pod));
    const pid = Number(await readFile(join(dir, 'pid'), 'utf8').catch(() => ''));
    if (pid > 0 && alive(pid)) {
      t.pid = pid;
      this.watch(uid);
      return;
    }
    await this.trySpawn(uid, t);
  }

  /**
   * Starts the process. Until it could (its token refused: the apiserver away, or its node authorizer not yet aware of
   * a pod just bound), the container is being created, as a kubelet reports one whose projected token it cannot mount:
   * waiting, not exited; tried again every second for the first half minute, then every RESTART_MS.
   */
  private async trySpawn(uid: string, t: Tracked, tries = 1): Promise<void> {
    try {
      await this.spawn(uid);
    } catch (e) {
      const again = tries < 30 ? 1000 : RESTART_MS;
      t.state = { kind: 'creating', message: `cannot mount its ServiceAccount token: ${messageOf(e)}` };
      this.o.log.warn(
        `the agent of ${t.pod.metadata.namespace}/${t.pod.metadata.name} did not start (${messageOf(e)}); trying again in ${again / 1000}s`,
      );
      this.onChange(uid);
      t.cancel = this.o.clock.setTimer(again, () => {
        if (this.tracked.get(uid) === t) void this.trySpawn(uid, t, tries + 1);
      });
    }
  }

  /** Kills a pod's process group (TERM, KILL after 5 s) and removes its files. */
  async stop(podUid: string): Promise<void> {
    const t = this.tracked.get(podUid);
    this.tracked.delete(podUid);
    t?.cancel?.();
    const dir = join(this.o.dir, podUid);
    const pid = t?.pid ?? Number(await readFile(join(dir, 'pid'), 'utf8').catch(() => ''));
    if (pid > 0 && alive(pid)) {
      signal(pid, 'SIGTERM');
      for (let i = 0; i < 50 && alive(pid); i++) await this.o.clock.sleep(100);
      if (alive(pid)) signal(pid, 'SIGKILL');
    }
    await rm(dir, { recursive: true, force: true });
  }

  private async spawn(uid: string): Promise<void> {
    const t = this.tracked.get(uid);
    if (!t) return;
    const pod = t.pod;
    const c = pod.spec!.containers![0]!;
    const dir = join(this.o.dir, uid);
    const sa = join(dir, 'serviceaccount');
    await mkdir(sa, { recursive: true, mode: 0o700 });
    const namespace = pod.metadata.namespace ?? 'default';
    const token = await this.o.token(namespace, pod.spec?.serviceAccountName ?? 'default', { name: pod.metadata.name, uid });
    await writeFile(join(sa, 'token'), token, { mode: 0o600 });
    await writeFile(join(sa, 'ca.crt'), this.o.ca);
    await writeFile(join(sa, 'namespace'), namespace);
    await rm(join(dir, 'exit'), { force: true });
    const command = [...(c.command ?? []), ...(c.args ?? [])];
    if (command[0] === 'kube-runbook') command.splice(0, 1, ...this.o.cli);
    // the anchor stands for the host's first process: it stays in the node's own mount namespace, which the agent's
    // scripts enter (KUBE_RUNBOOK_AGENT_HOST_PID), out of the agent's private one; it goes with the process group
    const mountSa = ['set -e', `mkdir -p ${SA_DIR}`, `mount --bind "$1" ${SA_DIR}`, 'shift', 'exec "$@"'].join('\n');
    const script = [
      'sa=$1; exitf=$2; shift 2',
      'sleep 2147483647 </dev/null >/dev/null 2>&1 &',
      'anchor=$!',
      `unshare -m --propagation private sh -c ${shq(mountSa)} sh "$sa" env KUBE_RUNBOOK_AGENT_HOST_PID="$anchor" "$@"`,
      'echo $? >"$exitf"',
      'kill "$anchor" 2>/dev/null',
    ].join('\n');
    const env = await this.containerEnv(pod, c.env ?? []);
    const logFd = openSync(join(dir, 'log'), 'a');
    const argv = ['sh', '-c', script, 'sh', sa, join(dir, 'exit'), ...command];
    // nsenter execs sh: the pid stays the session's, and the whole session lives in the node's namespace
    const [file, ...args] = this.o.netns ? ['nsenter', `--net=/run/netns/${this.o.netns}`, '--', ...argv] : argv;
    const child = spawn(file!, args, {
      detached: true,
      // the pod's group, as a kubelet runs it: the agent's own (runAsGroup) passes block-kubelet-egress's auto scope
      ...(c.securityContext?.runAsGroup !== undefined ? { gid: c.securityContext.runAsGroup } : {}),
      stdio: ['ignore', logFd, logFd],
      env: {
        PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
        HOME: dir,
        KUBERNETES_SERVICE_HOST: this.o.server.hostname.replace(/^\[(.*)\]$/, '$1'),
        KUBERNETES_SERVICE_PORT: this.o.server.port || '443',
        POD_NAME: pod.metadata.name,
        POD_NAMESPACE: namespace,
        ...env,
      },
    });
    closeSync(logFd);
    child.on('error', () => {});
    child.unref();
    if (!child.pid) throw new Error('unshare did not start');
    t.pid = child.pid;
    t.state = { kind: 'running' };
    await writeFile(join(dir, 'pid'), String(child.pid));
    this.o.log.info(`started the agent of ${namespace}/${pod.metadata.name} as pid ${child.pid}`);
    this.onChange(uid);
    this.watch(uid);
  }

  /** The container's `env`, resolved as a kubelet does for the kinds the agent uses: values, the pod's fields, Secrets. */
  private async containerEnv(pod: PodLite, env: EnvVar[]): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const ns = pod.metadata.namespace ?? 'default';
    for (const e of env) {
      if (e.value !== undefined) out[e.name] = e.value;
      else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') out[e.name] = pod.metadata.name;
      else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') out[e.name] = ns;
      else if (e.valueFrom?.secretKeyRef)
        out[e.name] = await this.o.secretKey(ns, e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key);
      else throw new Error(`env ${e.name}: this lab resolves values, metadata.name/namespace and secretKeyRef only`);
    }
    return out;
  }

  /** Polls the process each second; on its exit, reports it and starts it again after RESTART_MS. */
  private watch(uid: string): void {
    const t = this.tracked.get(uid);
    if (!t?.pid) return;
    const tick = () => {
      if (this.tracked.get(uid) !== t) return;
      if (alive(t.pid!)) {
        t.cancel = this.o.clock.setTimer(1000, tick);
        return;
      }
      void this.exited(uid, t);
    };
    t.cancel = this.o.clock.setTimer(1000, tick);
  }

  private async exited(uid: string, t: Tracked): Promise<void> {
    const dir = join(this.o.dir, uid);
    const code = Number((await readFile(join(dir, 'exit'), 'utf8').catch(() => '')).trim() || 137);
    const log = await readFile(join(dir, 'log'), 'utf8').catch(() => '');
    const message = log.trim().split('\n').slice(-5).join('\n').slice(-1024);
    const policy = t.pod.spec?.restartPolicy ?? 'Always';
    if (policy === 'Never' || (policy === 'OnFailure' && code === 0)) {
      t.state = { kind: 'ended', exitCode: code, message, restarts: t.restarts };
      this.o.log.info(
        `the agent of ${t.pod.metadata.namespace}/${t.pod.metadata.name} exited with ${code}; its pod ends (restartPolicy ${policy})`,
      );
      this.onChange(uid);
      return;
    }
    t.restarts++;
    t.state = { kind: 'exited', exitCode: code, message, restarts: t.restarts };
    this.o.log.warn(
      `the agent of ${t.pod.metadata.namespace}/${t.pod.metadata.name} exited with ${code}; starting it again in ${RESTART_MS / 1000}s`,
    );
    this.onChange(uid);
    t.cancel = this.o.clock.setTimer(RESTART_MS, () => {
      if (this.tracked.get(uid) === t) void this.trySpawn(uid, t);
    });
  }
}

function repository(image: string): string {
  return image.replace(/@.*$/, '').replace(/:[^:/]*$/, '');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  }
}
