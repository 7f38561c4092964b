import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import { labStateDir } from 'kube-runbook/internal/inventory/lab-home.js';

/**
 * Names and paths of a lab instance. Everything an instance makes on this machine is named after it, so
 * several instances live side by side and `lab down` finds what an instance made even without its state.
 */
export const DEFAULT_INSTANCE = 'lab';
/** The load balancer's namespace of an HA lab (`--control-planes 3`): HAProxy serving the VIP. */
export const LB_NODE = 'lb';
/** The namespace of `lab up --prometheus`: Debian's Prometheus scraping the control plane. */
export const PROMETHEUS_NODE = 'prom';
/** Where `lab up --otel`'s OTLP receiver keeps its service directory (it runs on this machine, in no namespace). */
export const OTEL_NODE = 'otel';
/**
 * The group node agents on the lab run in (`spec.transport.runAsGroup` of an agent inventory): block-kubelet-egress's
 * scope auto widens to the whole node there (a node namespace holds only its kubelet) and lets this group through.
 */
export const LAB_AGENT_GROUP = 61797;
const INSTANCE = /^[a-z0-9]{1,6}$/;

export function checkInstance(instance: string): string {
  if (!INSTANCE.test(instance))
    throw new KrError('LAB_BAD_INSTANCE', `a lab instance name is 1 to 6 characters a-z or 0-9 (got ${quote(instance)})`, {
      exit: EXIT.invalid,
    });
  return instance;
}

/** Names on this machine (network namespaces, links, chains, cgroups); Kubernetes Node names stay `cp-1`, `node-N`. */
export interface LabNames {
  /** Prefix of every network namespace and link of the instance. */
  prefix: string;
  bridge: string;
  netns(node: string): string;
  /**
   * Host side of a node's veth: `kr-<inst>-c1` for cp-1, `kr-<inst>-n<N>` for node-N, `kr-<inst>-r<N>` for rnode-N, `kr-<inst>-lb` for the load
   * balancer, `kr-<inst>-pm` for Prometheus (at most 15 characters).
   */
  veth(node: string): string;
  /** Filter chain that keeps the lab's traffic on its bridge. */
  chain: string;
  /** Prefix of every iptables chain of the instance. */
  chainPrefix: string;
  /** Name of the etcd cgroup (a directory under the blkio/io hierarchy). */
  cgroup: string;
  /** Prefix of every cgroup of the instance, in every hierarchy (etcd's, each real node's). */
  cgroupPrefix: string;
  /** A real node's cgroup (in every hierarchy): its containerd and kubelet in `system/`, its pods in `kubepods/`. */
  nodeCgroup(node: string): string;
  /** Context name in the kubeconfig: `lab` for instance `lab`, `lab-<inst>` otherwise. */
  context: string;
}

export function labNames(instance: string): LabNames {
  checkInstance(instance);
  const prefix = `kr-${instance}-`;
  return {
    prefix,
    bridge: `${prefix}br`,
    netns: (node) => `${prefix}${node}`,
    veth(node) {
      if (node === LB_NODE) return `${prefix}lb`;
      if (node === PROMETHEUS_NODE) return `${prefix}pm`;
      const m = /^(cp|node|rnode|sd)-(\d{1,5})$/.exec(node);
      if (!m) throw new KrError('LAB_BAD_NODE', `lab nodes are cp-N, node-N, rnode-N or sd-N (got ${quote(node)})`, { exit: EXIT.invalid });
      const name = `${prefix}${{ cp: 'c', rnode: 'r', sd: 's', node: 'n' }[m[1]!]}${m[2]}`;
      if (name.length > 15) throw new KrError('LAB_BAD_NODE', `interface name too long for node ${quote(node)}`);
      return name;
    },
    chain: `KR-${instance}-FWD`,
    chainPrefix: `KR-${instance}-`,
    cgroup: `kube-runbook-${instance}-etcd`,
    cgroupPrefix: `kube-runbook-${instance}-`,
    nodeCgroup: (node) => `kube-runbook-${instance}-${node}`,
    context: instance === DEFAULT_INSTANCE ? 'lab' : `lab-${instance}`,
  };
}

/** Files of an instance's state directory. */
export interface LabPaths {
  instance: string;
  stateDir: string;
  /** LabInfo as JSON, written before anything is made and updated as `up` goes. */
  infoFile: string;
  kubeconfig: string;
  inventoryFile: string;
  pkiDir: string;
  nodesDir: string;
  /** `<stateDir>/nodes/<node>/<service>/` with run, start, stop, status, health, log, pid. */
  serviceDir(node: string, service: string): string;
  /** `<stateDir>/nodes/<node>/runtime/`: the simulated containers and kill log of a node. */
  runtimeDir(node: string): string;
}

export function labPaths(instance: string = DEFAULT_INSTANCE, env: NodeJS.ProcessEnv = process.env): LabPaths {
  checkInstance(instance);
  const stateDir = labStateDir(instance, env);
  return runtimePathsOf(instance, stateDir);
}

export function runtimePathsOf(instance: string, stateDir: string): LabPaths {
  const nodesDir = join(stateDir, 'nodes');
  return {
    instance,
    stateDir,
    infoFile: join(stateDir, 'lab.json'),
    kubeconfig: join(stateDir, 'kubeconfig'),
    inventoryFile: join(stateDir, 'inventory.yaml'),
    pkiDir: join(stateDir, 'pki'),
    nodesDir,
    serviceDir: (node, service) => join(nodesDir, node, service),
    runtimeDir: (node) => join(nodesDir, node, 'runtime'),
  };
}

/** Locks and other machine-wide files shared by all instances (instances are machine-wide: netns names are global). */
export function machineRunDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.KUBE_RUNBOOK_RUN_DIR || '/run/kube-runbook';
}

/**
 * Short-lived files of an instance's real nodes under the machine's run directory (`/run/kube-runbook/<inst>/`):
 * containerd's state, sockets and its shims' sockets, whose paths must stay short (a unix socket path has at most
 * 107 bytes).
 */
export function instanceRunDir(instance: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(machineRunDir(env), checkInstance(instance));
}

/** `${KUBE_RUNBOOK_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kube-runbook}`: built Kubernetes binaries. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KUBE_RUNBOOK_CACHE_DIR) return resolve(env.KUBE_RUNBOOK_CACHE_DIR);
  return join(resolve(env.XDG_CACHE_HOME || join(homedir(), '.cache')), 'kube-runbook');
}

/** The key `lab up` makes for the executor to reach nodes over ssh, and those nodes' host keys as known_hosts. */
export const labSshFiles = (stateDir: string) => ({
  identityFile: join(stateDir, 'ssh', 'id_ed25519'),
  knownHostsFile: join(stateDir, 'ssh', 'known_hosts'),
});
