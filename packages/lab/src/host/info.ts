import { readFile, rename, writeFile } from 'node:fs/promises';
import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import { labPaths, runtimePathsOf } from './paths.js';
import type { LabSettings } from './settings.js';

export interface LabNodeInfo {
  /** Kubernetes Node name (cp-1, node-1, ...). */
  name: string;
  /** Network namespace on this machine. */
  netns: string;
  /** Zone label; cp-1 has none. */
  zone?: string;
  ip: string;
  roles: ('control-plane' | 'etcd' | 'worker' | 'load-balancer')[];
  /** A real node (`lab up --real-nodes`): the release's kubelet and containerd; a simulated kubelet otherwise. */
  real?: boolean;
  /** A real node's containerd: its ctr and socket, where `lab` reads the containers the runtime holds. */
  runtime?: { ctr: string; socket: string };
  /**
   * A node whose PID 1 is systemd (`lab up --kubeadm --systemd-nodes`): how it boots (its directory with the overlay's
   * layers and its console, the root filesystem below them, the read-only binds of this machine's directories) and,
   * once booted, its PID 1 in this machine's PID namespace.
   */
  systemd?: { dir: string; rootfs?: string; binds?: Record<string, string>; pid?: number };
}

/** A simulated worker: one the kubelet simulator runs (neither a real node nor one whose PID 1 is systemd). */
export const simulatedWorker = (n: LabNodeInfo): boolean => n.roles.includes('worker') && !n.real && !n.systemd;

export interface LabBinariesInfo {
  dir: string;
  version: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  etcd: string;
}

/** The lab's Prometheus: not a Kubernetes node, so not among `nodes` (nor in the inventory's nodes). */
export interface LabPrometheusInfo {
  /** Its base URL, `http://<address>:9090`, reached from this machine through the lab's bridge. */
  url: string;
  /** `prom`: its service directory is `<stateDir>/nodes/prom/prometheus/`. */
  node: string;
  netns: string;
  ip: string;
}

/** The lab's OTLP receiver (`lab up --otel`): an OpenTelemetry Collector on this machine. */
export interface LabOtelInfo {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT takes: `http://<the lab's address>:<port>`. */
  endpoint: string;
  /** Every trace and metric it received, a JSON line per request (OTLP JSON). */
  file: string;
  /** Its version. */
  version: string;
}

/** What a running lab is; `lab.json` in the state directory. */
export interface LabInfo {
  instance: string;
  stateDir: string;
  /** Admin kubeconfig. */
  kubeconfig: string;
  context: string;
  inventoryFile: string;
  apiserverUrl: string;
  /** cp-1's etcd client URL. */
  etcdUrl: string;
  /** The control-plane members of an HA lab (`--control-planes 3`); `apiserverUrl` is then the VIP. */
  members?: {
    name: string;
    apiserverUrl: string;
    etcdUrl: string;
    /** Admin kubeconfig that talks to this member's apiserver directly, not through the VIP. */
    kubeconfig: string;
  }[];
  /** `lab up --prometheus`: Prometheus in its own namespace, scraping every control-plane component. */
  prometheus?: LabPrometheusInfo;
  /** `lab up --otel`: the OTLP receiver. */
  otel?: LabOtelInfo;
  /** cp-1..N, node-1..N and, in an HA lab, `lb` (HAProxy). */
  nodes: LabNodeInfo[];
  settings: LabSettings;
  /** `starting` until `up` returned; `up` afterwards. */
  phase: 'starting' | 'up';
  subnet: string;
  bridge: string;
  chain: string;
  /** Absolute cgroup directory etcd runs in (blkio on cgroup v1, the unified hierarchy on v2). */
  etcdCgroup: string;
  etcdDataDir: string;
  binaries?: LabBinariesInfo;
  /** Seconds `up` took. */
  upSeconds?: number;
  createdAt: string;
}

export async function writeLabInfo(info: LabInfo): Promise<void> {
  const file = runtimePathsOf(info.instance, info.stateDir).infoFile;
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o644 });
  await rename(tmp, file);
}

/** The LabInfo of a running (or starting) instance; KrError LAB_NOT_FOUND when there is none. */
export async function readLabInfo(instance = 'lab'): Promise<LabInfo> {
  const file = labPaths(instance).infoFile;
  return readLabInfoFile(file, instance);
}

export async function readLabInfoFile(file: string, instance: string): Promise<LabInfo> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new KrError('LAB_NOT_FOUND', `no lab instance ${quote(instance)} on this machine; start one with \`kube-runbook-lab up\``, {
      exit: EXIT.refused,
    });
  }
  try {
    return JSON.parse(text) as LabInfo;
  } catch (e) {
    throw new KrError('LAB_STATE_BROKEN', `${file} is not valid JSON; \`kube-runbook-lab down --instance ${instance}\` cleans up`, {
      cause: e,
    });
  }
}
