import { createHash, X509Certificate } from 'node:crypto';
import { stringify } from 'yaml';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { goDuration, type LabSettings, DEFAULT_ETCD_QUOTA_BYTES } from '../host/settings.js';
import { SERVICE_CIDR } from '../host/pki.js';
import { APISERVER_PORT } from './components.js';
import { DEAD_CONTAINERS_KEPT, KUBELET_HEALTHZ_PORT } from './real-node-config.js';

/**
 * What the lab tells kubeadm (`lab up --kubeadm`): an InitConfiguration and ClusterConfiguration for cp-1, a
 * JoinConfiguration per real worker, the KubeletConfiguration every node shares (kubeadm uploads it to
 * kube-system/kubelet-config) and a patch per node for what differs by node. Everything else is kubeadm's own
 * default, so the manifests, certificates and kubeconfigs are what kubeadm writes on any machine.
 */

/** kubeadm's configuration API of the supported releases (1.34 and 1.37). */
const API = 'kubeadm.k8s.io/v1beta4';

/** The addons the lab cannot serve: CoreDNS (no DNS in the lab's pods' network) and kube-proxy (the lab routes the one Service its clients need). */
const SKIPPED_PHASES = ['addon/coredns', 'addon/kube-proxy'] as const;

/**
 * Preflight checks that cannot hold on the lab's nodes; every other check runs and must pass. On a cgroup v1
 * machine, SystemVerification: from 1.35 on it fails on cgroup v1 and says to skip it explicitly besides setting the
 * kubelet's `failCgroupV1: false` (which the lab's KubeletConfiguration does).
 */
const ignoredPreflight = (cgroupV1: boolean): string[] => (cgroupV1 ? ['SystemVerification'] : []);

/** The lab's bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`): one per instance, only ever reachable on the lab's bridge. */
export function bootstrapToken(instance: string): string {
  const h = createHash('sha256').update(`kube-runbook-lab/${instance}`).digest('hex');
  return `${h.slice(0, 6)}.${h.slice(6, 22)}`;
}

/** `sha256:<hex>` of the CA's public key (its SubjectPublicKeyInfo): the `--discovery-token-ca-cert-hash` of `kubeadm join`. */
export function caCertHash(caPem: string): string {
  const spki = new X509Certificate(caPem).publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

export interface KubeadmNode {
  name: string;
  ip: string;
  zone?: string;
  /** unix socket of the node's containerd. */
  criSocket: string;
  /** Directory of the node's kubeadm patches (kubeletconfiguration, the per-node settings). */
  patches: string;
  /** The machine's cgroup hierarchy is v1. */
  cgroupV1: boolean;
}

type Arg = { name: string; value: string };
const args = (o: Record<string, string | number>): Arg[] => Object.entries(o).map(([name, value]) => ({ name, value: String(value) }));

/** What kubeadm's NodeRegistrationOptions says of a lab node. */
function registration(n: KubeadmNode) {
  const ignored = ignoredPreflight(n.cgroupV1);
  return {
    name: n.name,
    criSocket: `unix://${n.criSocket}`,
    // the images are imported under kubeadm's names beforehand: nothing may be pulled
    imagePullPolicy: 'Never',
    ...(ignored.length ? { ignorePreflightErrors: ignored } : {}),
    kubeletExtraArgs: args({
      'node-ip': n.ip,
      'node-labels': [...(n.zone ? [`topology.kubernetes.io/zone=${n.zone}`] : []), 'topology.kubernetes.io/region=lab'].join(','),
      'maximum-dead-containers-per-container': DEAD_CONTAINERS_KEPT,
    }),
  };
}

/**
 * The KubeletConfiguration all nodes share (kubeadm adds its own fields: authentication by its CA, the static pod
 * path, the cluster DNS): cgroupfs, cgroup v1 allowed, the lab's lease timing, the health endpoint on every
 * address of the node (the lab's service checks it from this machine), no image garbage collection nor disk
 * eviction (the lab's images cannot be pulled again).
 */
function sharedKubeletConfig(s: LabSettings) {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    healthzBindAddress: '0.0.0.0',
    healthzPort: KUBELET_HEALTHZ_PORT,
    nodeLeaseDurationSeconds: Math.max(1, Math.round(s.leaseDuration / 1000)),
    nodeStatusUpdateFrequency: goDuration(s.leaseRenewInterval),
    nodeStatusReportFrequency: goDuration(s.nodeStatusReportFrequency),
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '100Mi' },
    resolvConf: '/etc/resolv.conf',
    serializeImagePulls: false,
  };
}

/** The node's own part of its KubeletConfiguration (a kubeadm patch): its cgroup, its pod logs, its containerd. */
export function kubeletPatch(o: { cgroup: string; podLogs: string; criSocket: string }): string {
  return stringify({ cgroupRoot: `/${o.cgroup}`, podLogsDir: o.podLogs, containerRuntimeEndpoint: `unix://${o.criSocket}` });
}

/** The name of that patch in the node's patches directory: target `kubeletconfiguration`, a merge patch. */
export const KUBELET_PATCH_FILE = 'kubeletconfiguration+merge.yaml';

export interface InitInputs {
  instance: string;
  clusterName: string;
  version: string;
  cp: KubeadmNode;
  settings: LabSettings;
  /** `host:port` every client and kubelet reaches the control plane at: the VIP of an HA lab, else cp-1's apiserver. */
  controlPlaneEndpoint: string;
  /**
   * With more than one member: the key `kubeadm init --upload-certs` encrypts the control plane's certificates with
   * (the kubeadm-certs Secret), which `kubeadm join --control-plane` decrypts them with.
   */
  certificateKey?: string;
}

/** Where kubeadm's etcd serves its metrics (plain HTTP; kubeadm's `EtcdMetricsPort`). */
export const KUBEADM_ETCD_METRICS_PORT = 2381;

/**
 * `kubeadm init --config`: the InitConfiguration, ClusterConfiguration and the shared KubeletConfiguration. The
 * controller-manager, apiserver and etcd get the lab's settings as extraArgs (node-monitor-grace-period and the rest
 * of the node lifecycle controller's, the default toleration seconds, etcd's quota), so a kubeadm lab behaves as
 * every other lab does.
 */
export function initConfig(i: InitInputs): string {
  const s = i.settings;
  const tol = s.defaultTolerationSeconds;
  // --prometheus: kubeadm binds the controller-manager's and the scheduler's metrics to 127.0.0.1; Prometheus is
  // another node (kubeadm's probes then ask the node's address)
  const prometheusBind: Record<string, string> = s.prometheus ? { 'bind-address': '0.0.0.0' } : {};
  const init = {
    apiVersion: API,
    kind: 'InitConfiguration',
    bootstrapTokens: [
      {
        token: bootstrapToken(i.instance),
        ttl: '24h0m0s',
        groups: ['system:bootstrappers:kubeadm:default-node-token'],
        usages: ['signing', 'authentication'],
      },
    ],
    localAPIEndpoint: { advertiseAddress: i.cp.ip, bindPort: APISERVER_PORT },
    ...(i.certificateKey ? { certificateKey: i.certificateKey } : {}),
    nodeRegistration: registration(i.cp),
    patches: { directory: i.cp.patches },
    skipPhases: [...SKIPPED_PHASES],
  };
  const cluster = {
    apiVersion: API,
    kind: 'ClusterConfiguration',
    clusterName: i.clusterName,
    kubernetesVersion: `v${i.version}`,
    controlPlaneEndpoint: i.controlPlaneEndpoint,
    networking: { serviceSubnet: SERVICE_CIDR, dnsDomain: 'cluster.local' },
    etcd: {
      // kubeadm's default data directory, /var/lib/etcd: each node's own, bound in its mount namespace
      local: {
        extraArgs: args({
          'quota-backend-bytes': s.etcdQuotaBytes ?? DEFAULT_ETCD_QUOTA_BYTES,
          'auto-compaction-mode': 'periodic',
          'auto-compaction-retention': '5m',
          // --prometheus: kubeadm serves etcd's metrics on 127.0.0.1:2381 only; Prometheus scrapes each member's address
          ...(s.prometheus ? { 'listen-metrics-urls': `http://0.0.0.0:${KUBEADM_ETCD_METRICS_PORT}` } : {}),
        }),
      },
    },
    apiServer: {
      extraArgs: args({ 'default-not-ready-toleration-seconds': tol, 'default-unreachable-toleration-seconds': tol }),
    },
    controllerManager: {
      extraArgs: args({
        'node-monitor-grace-period': goDuration(s.nodeMonitorGracePeriod),
        'node-monitor-period': goDuration(s.nodeMonitorPeriod),
        'node-startup-grace-period': goDuration(s.nodeStartupGracePeriod),
        'node-eviction-rate': s.nodeEvictionRate,
        'secondary-node-eviction-rate': s.secondaryNodeEvictionRate,
        'unhealthy-zone-threshold': s.unhealthyZoneThreshold,
        'large-cluster-size-threshold': s.largeClusterSizeThreshold,
        // as the lab's own controller-manager: its node-health decisions ("Node hasn't been updated") in its log
        v: 2,
        ...prometheusBind,
      }),
    },
    ...(s.prometheus ? { scheduler: { extraArgs: args(prometheusBind) } } : {}),
    // kubeadm leaves these addons out of `config images list` and of its preflight's image check
    dns: { disabled: true },
    proxy: { disabled: true },
  };
  return [init, cluster, sharedKubeletConfig(s)].map((d) => stringify(d)).join('---\n');
}

/**
 * `kubeadm join --config`: discovery by the bootstrap token at the control plane's endpoint, the CA pinned by its
 * hash. With `certificateKey`, a control-plane member (`--control-plane`): it fetches the control plane's
 * certificates from the kubeadm-certs Secret, adds itself to etcd and runs its own static pods, advertising its address.
 */
export function joinConfig(o: { instance: string; apiserver: string; caHash: string; node: KubeadmNode; certificateKey?: string }): string {
  return stringify({
    apiVersion: API,
    kind: 'JoinConfiguration',
    discovery: { bootstrapToken: { apiServerEndpoint: o.apiserver, token: bootstrapToken(o.instance), caCertHashes: [o.caHash] } },
    nodeRegistration: registration(o.node),
    ...(o.certificateKey
      ? { controlPlane: { localAPIEndpoint: { advertiseAddress: o.node.ip, bindPort: APISERVER_PORT }, certificateKey: o.certificateKey } }
      : {}),
    patches: { directory: o.node.patches },
  });
}

/**
 * The kubelet's command line as kubeadm's systemd drop-in (10-kubeadm.conf) makes it, for a lab service: sh reads
 * kubeadm-flags.env (KUBELET_KUBEADM_ARGS) as the unit's EnvironmentFile does and runs the kubelet (`$0`) with
 * kubeadm's kubeconfigs and configuration and those flags; arguments the lab adds follow (`$@`).
 */
export function kubeadmKubeletCommand(kubelet: string): string[] {
  const script =
    'KUBELET_KUBEADM_ARGS=; [ -f /var/lib/kubelet/kubeadm-flags.env ] && . /var/lib/kubelet/kubeadm-flags.env; ' +
    'exec "$0" --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf ' +
    '--config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS "$@"';
  return ['/bin/sh', '-c', script, kubelet];
}

/**
 * kubeadm's systemctl on a lab node (first on kubeadm's PATH): kubeadm stops the kubelet before it writes the
 * kubelet's files and starts it after (`kubeadm init` and `join`'s kubelet-start phase), and its preflight asks
 * whether the unit is enabled; here those calls run the lab's kubelet service's scripts in `serviceDir`. Anything
 * else fails, as systemctl would on a machine without systemd.
 */
export function systemctlShim(serviceDir: string, node: string): string {
  const d = shq(serviceDir);
  return `#!/bin/sh
# kube-runbook lab: systemctl for kubeadm on ${node}, run by the lab's kubelet service (no systemd here).
unit=\${2%.service}
case "$1" in
  daemon-reload) exit 0 ;;
esac
[ "$unit" = kubelet ] || { echo "systemctl $*: only the kubelet unit is known on this lab node" >&2; exit 1; }
case "$1" in
  start) exec ${d}/start ;;
  stop) exec ${d}/stop ;;
  restart) ${d}/stop && exec ${d}/start ;;
  is-active) exec ${d}/status ;;
  is-enabled|enable) exit 0 ;;
  *) echo "systemctl $1: not done on this lab node" >&2; exit 1 ;;
esac
`;
}
