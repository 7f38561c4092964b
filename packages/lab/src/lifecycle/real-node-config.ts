import { join } from 'node:path';
import { stringify } from 'yaml';
import type { RealNodeBinaries } from '../install/real-nodes.js';

/**
 * The files of one real node: containerd's config (v3, containerd 2.x), the CNI network and the kubelet's
 * KubeletConfiguration. Every path a component would put in /var/lib, /run or /var/log by default is moved into
 * the node's own directories, so that nodes never share state and `lab down` finds everything by path.
 */
export interface RealNodePlan {
  instance: string;
  node: string;
  netns: string;
  ip: string;
  zone?: string;
  /** The node's pod network (host-local IPAM over a bridge in its namespace). */
  podCidr: string;
  /** `<stateDir>/nodes/<node>/`: containerd's root, the kubelet's root, pod logs, CNI config. */
  dir: string;
  /** `/run/kube-runbook/<inst>/<node>/`: containerd's state and sockets (short paths). */
  runDir: string;
  /** The node's cgroup name (`kube-runbook-<inst>-<node>`): the kubelet's cgroupRoot. */
  cgroup: string;
  caFile: string;
  certFile: string;
  keyFile: string;
  leaseDurationSeconds: number;
  statusUpdateFrequency: string;
  statusReportFrequency: string;
  bin: RealNodeBinaries;
  /**
   * A control-plane node of `lab up --static-pods`: the kubelet runs the manifests of this directory (kubeadm's
   * /etc/kubernetes/manifests) and registers with kubeadm's control-plane taint.
   */
  staticPodPath?: string;
}

/** The taint kubeadm gives a control-plane node (`kubeadm init phase mark-control-plane`). */
const CONTROL_PLANE_TAINT = { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' } as const;

const KUBELET_PORT = 10250;
export const KUBELET_HEALTHZ_PORT = 10248;

/** Real node i's pod network: 100.96.i.0/24 (the simulator's nodes use 100.64.i.0/24). */
export function realPodCidr(index: number): string {
  return `100.${96 + (index >> 8)}.${index & 255}.0/24`;
}

export const realNodePaths = (p: Pick<RealNodePlan, 'dir' | 'runDir'>) => ({
  containerdRoot: join(p.dir, 'containerd'),
  containerdState: join(p.runDir, 'containerd'),
  socket: join(p.runDir, 'containerd.sock'),
  kubeletRoot: join(p.dir, 'kubelet-root'),
  podLogs: join(p.dir, 'pod-logs'),
  cniConfDir: join(p.dir, 'cni'),
  cniIpamDir: join(p.dir, 'cni-ipam'),
});

/** The CNI network's name, which libcni also uses for the result cache it keeps in /var/lib/cni/results. */
const cniNetworkName = (instance: string, node: string): string => `kr-${instance}-${node}`;

const toml = (v: string | number | boolean | string[]): string =>
  Array.isArray(v) ? `[${v.map((x) => JSON.stringify(x)).join(', ')}]` : typeof v === 'string' ? JSON.stringify(v) : String(v);

function tomlTables(tables: [string, Record<string, string | number | boolean | string[]>][]): string {
  return tables
    .map(
      ([name, kv]) =>
        `${name ? `[${name}]\n` : ''}${Object.entries(kv)
          .map(([k, v]) => `${k} = ${toml(v)}\n`)
          .join('')}`,
    )
    .join('\n');
}

export function containerdConfig(p: RealNodePlan): string {
  const f = realNodePaths(p);
  const rt = "plugins.'io.containerd.cri.v1.runtime'";
  return tomlTables([
    [
      '',
      {
        version: 3,
        root: f.containerdRoot,
        state: f.containerdState,
        // NRI would listen on /var/run/nri, shared by every node; the other snapshotters are not built
        disabled_plugins: [
          'io.containerd.nri.v1.nri',
          'io.containerd.snapshotter.v1.btrfs',
          'io.containerd.snapshotter.v1.zfs',
          'io.containerd.snapshotter.v1.devmapper',
        ],
      },
    ],
    ['grpc', { address: f.socket }],
    ['ttrpc', { address: `${f.socket}.ttrpc` }],
    ["plugins.'io.containerd.internal.v1.opt'", { path: join(f.containerdRoot, 'opt') }],
    ["plugins.'io.containerd.shim.v1.manager'", { socket_dir: join(p.runDir, 's') }],
    ["plugins.'io.containerd.cri.v1.images'", { snapshotter: 'overlayfs' }],
    ["plugins.'io.containerd.cri.v1.images'.pinned_images", { sandbox: p.bin.images.pause.ref }],
    // pods' network namespaces under the node's state, not in /var/run/netns beside the lab's own
    // containers' oom_score_adj no lower than containerd's own: lowering it needs CAP_SYS_RESOURCE, which a
    // machine may not give root (a container or a VM sandbox); a node that has it loses nothing the lab tests
    [rt, { netns_mounts_under_state_dir: true, enable_cdi: false, restrict_oom_score_adj: true }],
    [`${rt}.containerd`, { default_runtime_name: 'runc' }],
    [`${rt}.containerd.runtimes.runc`, { runtime_type: 'io.containerd.runc.v2' }],
    [`${rt}.containerd.runtimes.runc.options`, { BinaryName: p.bin.runc, Root: join(p.runDir, 'runc'), SystemdCgroup: false }],
    [`${rt}.cni`, { bin_dirs: [p.bin.cniBinDir], conf_dir: f.cniConfDir, max_conf_num: 1 }],
  ]);
}

/**
 * A bridge `cni0` in the node's namespace (the pods' gateway), addresses from the node's pod CIDR. Pods' traffic that
 * leaves the pod network is masqueraded as the node's address (ipMasq): no other namespace of the lab has a route to a
 * node's pods, and with it a pod reaches the apiserver (through the `kubernetes` Service's address) and the lab's
 * nodes, as the executor's Job does.
 */
export function cniConfig(p: RealNodePlan): string {
  return bridgeCniConfig(cniNetworkName(p.instance, p.node), p.podCidr, realNodePaths(p).cniIpamDir);
}

/** The CNI network of a node's pods: a bridge `cni0`, their gateway, addresses from `podCidr`, their traffic out masqueraded. */
export function bridgeCniConfig(name: string, podCidr: string, ipamDataDir?: string): string {
  const ipam = {
    type: 'host-local',
    ranges: [[{ subnet: podCidr }]],
    routes: [{ dst: '0.0.0.0/0' }],
    ...(ipamDataDir ? { dataDir: ipamDataDir } : {}),
  };
  const plugin = { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: true, hairpinMode: true, ipam };
  return `${JSON.stringify({ cniVersion: '1.0.0', name, plugins: [plugin] }, null, 2)}\n`;
}

/**
 * The KubeletConfiguration: cgroupfs under the node's own cgroup, cgroup v1 allowed (`failCgroupV1: false`; the
 * kubelet of 1.35 and later refuses v1 without it, and the lab runs on either), serving on the node's address
 * with the lab CA's certificate, webhook authorization (the apiserver's client certificate is system:masters),
 * the lab's compressed lease timing, and no image garbage collection or disk eviction (the lab's images cannot
 * be pulled again).
 */
export function kubeletConfig(p: RealNodePlan): string {
  const f = realNodePaths(p);
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: p.ip,
    port: KUBELET_PORT,
    readOnlyPort: 0,
    healthzBindAddress: p.ip,
    healthzPort: KUBELET_HEALTHZ_PORT,
    tlsCertFile: p.certFile,
    tlsPrivateKeyFile: p.keyFile,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: p.caFile } },
    authorization: { mode: 'Webhook' },
    containerRuntimeEndpoint: `unix://${f.socket}`,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: `/${p.cgroup}`,
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    podLogsDir: f.podLogs,
    nodeLeaseDurationSeconds: p.leaseDurationSeconds,
    nodeStatusUpdateFrequency: p.statusUpdateFrequency,
    nodeStatusReportFrequency: p.statusReportFrequency,
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '100Mi' },
    resolvConf: '/etc/resolv.conf',
    clusterDomain: 'cluster.local',
    maxPods: 110,
    serializeImagePulls: false,
    ...(p.staticPodPath ? { staticPodPath: p.staticPodPath, registerWithTaints: [CONTROL_PLANE_TAINT] } : {}),
  });
}

/**
 * Dead instances the lab's kubelets keep of each container (the kubelet's default: 1), and so their logs: a static
 * pod's controller-manager that restarted twice under a fault (its liveness probe failing on late leader-lease
 * renewals) still has its first instance's log, where the lab reads what it evicted and when it lost its leadership.
 * kubeadm sets no such flag; the lab's kubelets differ from kubeadm's here only.
 */
export const DEAD_CONTAINERS_KEPT = 10;

/** The kubelet's command line. */
export function kubeletArgs(p: RealNodePlan, kubeconfig: string, config: string): string[] {
  return [
    p.bin.kubelet,
    `--config=${config}`,
    `--kubeconfig=${kubeconfig}`,
    `--hostname-override=${p.node}`,
    `--node-ip=${p.ip}`,
    `--root-dir=${realNodePaths(p).kubeletRoot}`,
    `--node-labels=${[...(p.zone ? [`topology.kubernetes.io/zone=${p.zone}`] : []), 'topology.kubernetes.io/region=lab'].join(',')}`,
    `--maximum-dead-containers-per-container=${DEAD_CONTAINERS_KEPT}`,
    '--v=1',
  ];
}
