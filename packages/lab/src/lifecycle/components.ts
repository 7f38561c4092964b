import { join } from 'node:path';
import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import type { LabBinariesInfo } from '../host/info.js';
import type { CgroupJoin } from '../host/cgroup.js';
import type { LabPki } from '../host/pki.js';
import { KUBELET_CLIENT, SERVICE_CIDR } from '../host/pki.js';
import { httpGet, type ServiceSpec } from './services.js';
import { DEFAULT_ETCD_QUOTA_BYTES, goDuration, type LabSettings } from '../host/settings.js';

/** What the component command lines are made from. */
export interface ComponentContext {
  instance: string;
  /** The member being described (cp-1 of a one-member lab). */
  cpNode: string;
  cpNetns: string;
  cpIp: string;
  /** Every control-plane member (one, or three for an HA lab): the etcd cluster and the apiservers' etcd servers. */
  members: { name: string; ip: string }[];
  serviceDir(node: string, service: string): string;
  pki: LabPki;
  bin: LabBinariesInfo;
  settings: LabSettings;
  /** etcd's blkio (v1) or io (v2) cgroup, `throttle-etcd-disk`'s. */
  etcdCgroup: CgroupJoin;
  /** The member's components' own cpu cgroups, by service; a component without one runs in the lab's. */
  cpuCgroups?: ReadonlyMap<string, CgroupJoin>;
}

export const APISERVER_PORT = 6443;
export const ETCD_PORT = 2379;

function etcdDataDir(c: ComponentContext): string {
  return join(c.serviceDir(c.cpNode, 'etcd'), 'data');
}

const ETCD_PEER_PORT = 2380;

/**
 * The member's peer URLs: a one-member etcd keeps its peer port on loopback (nobody else joins); the members of
 * an HA lab talk over the lab's bridge and start as one cluster (`--initial-cluster` names all of them).
 */
function etcdPeering(c: ComponentContext): string[] {
  if (c.members.length <= 1)
    return [
      `--listen-peer-urls=http://127.0.0.1:${ETCD_PEER_PORT}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${ETCD_PEER_PORT}`,
      `--initial-cluster=${c.cpNode}=http://127.0.0.1:${ETCD_PEER_PORT}`,
    ];
  const peer = `http://${c.cpIp}:${ETCD_PEER_PORT}`;
  return [
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=${c.members.map((m) => `${m.name}=http://${m.ip}:${ETCD_PEER_PORT}`).join(',')}`,
    `--initial-cluster-token=kube-runbook-${c.instance}`,
  ];
}

/** `--etcd-servers` of a member's apiserver: its own etcd first, then the others (the client fails over). */
function etcdServers(c: ComponentContext): string {
  if (c.members.length <= 1) return `http://127.0.0.1:${ETCD_PORT}`;
  const own = c.members.find((m) => m.name === c.cpNode);
  const ordered = [...(own ? [own] : []), ...c.members.filter((m) => m.name !== c.cpNode)];
  return ordered.map((m) => `http://${m.ip}:${ETCD_PORT}`).join(',');
}

export function etcdService(c: ComponentContext): ServiceSpec {
  const dir = c.serviceDir(c.cpNode, 'etcd');
  return {
    ...base(c, c.cpNode, 'etcd', c.cpNetns, dir),
    command: [
      c.bin.etcd,
      `--name=${c.cpNode}`,
      `--data-dir=${etcdDataDir(c)}`,
      `--listen-client-urls=http://127.0.0.1:${ETCD_PORT},http://${c.cpIp}:${ETCD_PORT}`,
      `--advertise-client-urls=http://${c.cpIp}:${ETCD_PORT}`,
      ...etcdPeering(c),
      '--initial-cluster-state=new',
      // small and light, but with fsync: throttling its disk must be felt
      `--quota-backend-bytes=${c.settings.etcdQuotaBytes ?? DEFAULT_ETCD_QUOTA_BYTES}`,
      '--snapshot-count=10000',
      '--auto-compaction-mode=periodic',
      '--auto-compaction-retention=5m',
      '--logger=zap',
      '--log-level=warn',
    ],
    joins: [c.etcdCgroup, ...joinsOf(c, 'etcd')],
    health: `${httpGet(`http://${c.cpIp}:${ETCD_PORT}/health`)} | grep -q '"health":"true"'`,
    stopTimeoutSec: 10,
  };
}

export function apiserverService(c: ComponentContext): ServiceSpec {
  const dir = c.serviceDir(c.cpNode, 'kube-apiserver');
  const tol = String(c.settings.defaultTolerationSeconds);
  return {
    ...base(c, c.cpNode, 'kube-apiserver', c.cpNetns, dir),
    command: [
      c.bin.kubeApiserver,
      `--advertise-address=${c.cpIp}`,
      '--bind-address=0.0.0.0',
      `--secure-port=${APISERVER_PORT}`,
      `--cert-dir=${dir}`,
      `--etcd-servers=${etcdServers(c)}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--client-ca-file=${c.pki.caCert}`,
      `--tls-cert-file=${c.pki.cert('apiserver')}`,
      `--tls-private-key-file=${c.pki.key('apiserver')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${c.pki.saPub}`,
      `--service-account-signing-key-file=${c.pki.saKey}`,
      `--token-auth-file=${c.pki.tokenFile}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      `--default-not-ready-toleration-seconds=${tol}`,
      `--default-unreachable-toleration-seconds=${tol}`,
      '--allow-privileged=true',
      ...kubeletClientFlags(c),
      '--profiling=false',
      '--v=1',
    ],
    health: `${httpGet(`https://${c.cpIp}:${APISERVER_PORT}/readyz`, { caFile: c.pki.caCert })} | grep -qx ok`,
    // 1.20's graceful shutdown waits on long-running requests for as long as it is let: the lab does not
    stopTimeoutSec: 3,
  };
}

/**
 * A leader-elected controller of the member (the controller-manager, the scheduler): one kubeconfig for its API
 * access and for delegated authentication and authorization, its secure `port` on every address, healthy when its
 * /healthz there says ok, restarted when it exits; `flags` after those.
 */
function leaderElected(c: ComponentContext, service: string, program: string, port: number, flags: string[]): ServiceSpec {
  const dir = c.serviceDir(c.cpNode, service);
  const kubeconfig = join(dir, 'kubeconfig');
  return {
    ...base(c, c.cpNode, service, c.cpNetns, dir),
    command: [
      program,
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--bind-address=0.0.0.0',
      '--leader-elect=true',
      ...flags,
    ],
    health: `${httpGet(`https://${c.cpIp}:${port}/healthz`, { insecure: true })} | grep -qx ok`,
    stopTimeoutSec: 10,
    restart: true,
  };
}

export function controllerManagerService(c: ComponentContext): ServiceSpec {
  const s = c.settings;
  return leaderElected(c, 'kube-controller-manager', c.bin.kubeControllerManager, 10257, [
    '--use-service-account-credentials=true',
    `--service-account-private-key-file=${c.pki.saKey}`,
    `--root-ca-file=${c.pki.caCert}`,
    `--cluster-signing-cert-file=${c.pki.caCert}`,
    `--cluster-signing-key-file=${c.pki.caKey}`,
    `--node-monitor-grace-period=${goDuration(s.nodeMonitorGracePeriod)}`,
    `--node-monitor-period=${goDuration(s.nodeMonitorPeriod)}`,
    `--node-startup-grace-period=${goDuration(s.nodeStartupGracePeriod)}`,
    `--node-eviction-rate=${s.nodeEvictionRate}`,
    `--secondary-node-eviction-rate=${s.secondaryNodeEvictionRate}`,
    `--unhealthy-zone-threshold=${s.unhealthyZoneThreshold}`,
    `--large-cluster-size-threshold=${s.largeClusterSizeThreshold}`,
    '--profiling=false',
    '--v=2',
  ]);
}

export function schedulerService(c: ComponentContext): ServiceSpec {
  return leaderElected(c, 'kube-scheduler', c.bin.kubeScheduler, 10259, ['--profiling=false', '--v=1']);
}

/**
 * The `kubelet` of a simulated worker node: the node's forwarder to the apiserver, inside its network namespace
 * (`socat UNIX-LISTEN:<dir>/api.sock,fork TCP:<apiserver>`). The node's simulator, in a process shared with other
 * nodes (`kubeletSimsService`), talks to the apiserver only through that socket: the node's firewall rules cut it
 * as they would a kubelet, and stopping this service cuts the node off (its renewals stop, its containers stay).
 */
export function kubeletService(c: ComponentContext, node: string, netns: string, apiserver: { host: string; port: number }): ServiceSpec {
  const dir = c.serviceDir(node, 'kubelet');
  const stale = Math.ceil(c.settings.leaseDuration / 1000);
  return {
    ...base(c, node, 'kubelet', netns, dir),
    command: ['socat', `UNIX-LISTEN:${socatPath(apiSocketOf(dir))},fork,unlink-early,mode=600`, `TCP:${apiserver.host}:${apiserver.port}`],
    // healthy: the forwarder runs and the node's simulator renewed its lease within one lease duration
    health: `[ -n "$(find ${shq(join(dir, 'heartbeat'))} -newermt '${stale} seconds ago' 2>/dev/null)" ]`,
    stopTimeoutSec: 5,
    // socat forks a child per connection: the node's open connections go with it
    killGroup: true,
  };
}

/** The forwarder's socket in a node's kubelet service directory. */
export function apiSocketOf(kubeletDir: string): string {
  return join(kubeletDir, 'api.sock');
}

/** A path as one word of a socat address (its separators `:` and `,` cannot be escaped portably: refused). */
function socatPath(path: string): string {
  if (/[:,!\s]/.test(path))
    throw new KrError(
      'LAB_BAD_STATE_DIR',
      `the lab's state directory cannot hold a socat socket path: ${quote(path)} (no ':', ',', '!' or spaces)`,
      { exit: EXIT.invalid },
    );
  return path;
}

/**
 * A group of simulated kubelets in one process, in the host's network namespace:
 * `<node> dist/lab/sim/kubelet-sim.js --group=<dir>/group.json`. Each node in it reaches the apiserver through its
 * own `kubelet` forwarder.
 */
export function kubeletSimsService(c: ComponentContext, dir: string, group: string, nodeBinary: string, simScript: string): ServiceSpec {
  return {
    instance: c.instance,
    node: group,
    service: 'kubelet-sims',
    dir,
    command: [nodeBinary, simScript, `--group=${join(dir, 'group.json')}`],
    health: 'true',
    stopTimeoutSec: 5,
    // a crash takes many nodes down at once: start it again, as systemd would; the nodes' state is on disk
    // (runtime, agent pids) and in their forwarders (a stopped kubelet stays stopped)
    restart: true,
  };
}

/**
 * With real nodes: the apiserver dials their kubelets (logs, exec, port-forward) at their InternalIP (their
 * hostname resolves nowhere), shows its client certificate and checks theirs against the lab CA.
 */
function kubeletClientFlags(c: ComponentContext): string[] {
  if (!c.settings.realNodes) return [];
  return [
    `--kubelet-client-certificate=${c.pki.cert(KUBELET_CLIENT)}`,
    `--kubelet-client-key=${c.pki.key(KUBELET_CLIENT)}`,
    `--kubelet-certificate-authority=${c.pki.caCert}`,
    '--kubelet-preferred-address-types=InternalIP,Hostname',
  ];
}

function base(c: ComponentContext, node: string, service: string, netns: string, dir: string) {
  return { instance: c.instance, node, service, netns, dir, joins: node === c.cpNode ? joinsOf(c, service) : [] };
}

function joinsOf(c: ComponentContext, service: string): CgroupJoin[] {
  const own = c.cpuCgroups?.get(service);
  return own ? [own] : [];
}
