import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { joinConfig, KUBELET_PATCH_FILE, type KubeadmNode } from './kubeadm-config.js';
import { bridgeCniConfig } from './real-node-config.js';

/**
 * The files of a node whose PID 1 is systemd and that `kubeadm join` makes a node of the lab's cluster, laid out as
 * on a machine set up by kubeadm's install guide: the kubelet unit and its `10-kubeadm.conf` drop-in as kubeadm's
 * packages install them (/usr/lib/systemd/system, /usr/bin/kubelet), the unit enabled and crash-looping until
 * `kubeadm join` writes its configuration; containerd as a unit of its own with the systemd cgroup driver (kubeadm's
 * default for the kubelet), the CNI plugins in /opt/cni/bin and a bridge network. The join's configuration and the
 * node's kubelet patch are written beside them. Paths are the node's.
 */
export interface SystemdNodeUnitsPlan {
  node: string;
  ip: string;
  zone?: string;
  /** Directory (in the node) of the release's kubelet and kubeadm. */
  kubernetesDir: string;
  /** Directory (in the node) of containerd, ctr and containerd-shim-runc-v2. */
  containerdDir: string;
  /** The pause image by kubeadm's name (`kubeadm config images list`): containerd's sandbox image. */
  sandboxImage: string;
  /** The node's pod network (host-local IPAM over the bridge `cni0`). */
  podCidr: string;
  /** What `kubeadm join` is told: the lab's instance (its bootstrap token), the apiserver, the CA's hash. */
  join: { instance: string; apiserver: string; caHash: string; cgroupV1: boolean };
}

/** Where the join's files are, in the node. */
export const SYSTEMD_NODE_JOIN_CONFIG = '/etc/kubernetes/kube-runbook/join.yaml';
const PATCHES = '/etc/kubernetes/kube-runbook/patches';
const CRI_SOCKET = '/run/containerd/containerd.sock';

/** The node's containerd socket seen from this machine, through its PID 1's root (`lab containers`, `status`). */
export const systemdNodeSocket = (pid: number) => `/proc/${pid}/root${CRI_SOCKET}`;

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * containerd's config: its defaults (/var/lib/containerd, /run/containerd/containerd.sock, /opt/cni/bin,
 * /etc/cni/net.d) but the native snapshotter, as the node's root is itself an overlay, which overlayfs does not take
 * as an upper layer; the systemd cgroup driver, as the kubelet's; the sandbox image by kubeadm's name; no NRI;
 * oom_score_adj no lower than containerd's (lowering it needs CAP_SYS_RESOURCE, which a sandboxed machine may not give).
 */
const containerdToml = (sandbox: string) => `version = 3
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[plugins.'io.containerd.cri.v1.images']
snapshotter = "native"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
sandbox = ${JSON.stringify(sandbox)}

[plugins.'io.containerd.cri.v1.runtime']
enable_cdi = false
restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
SystemdCgroup = true
`;

/** kubeadm's packages' kubelet.service: the bare kubelet, restarted every 10 s until kubeadm has configured it. */
const KUBELET_SERVICE = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`;

/** kubeadm's packages' drop-in: the kubeconfigs, the configuration and the flags `kubeadm init`/`join` write. */
const KUBEADM_DROP_IN = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`;

const containerdService = (dir: string) => `[Unit]
Description=containerd container runtime
After=network.target local-fs.target

[Service]
Environment=PATH=${dir}:${PATH}
ExecStart=${dir}/containerd --config /etc/containerd/config.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`;

/** The node as kubeadm's configuration describes it. */
const systemdKubeadmNode = (p: SystemdNodeUnitsPlan): KubeadmNode => ({
  name: p.node,
  ip: p.ip,
  ...(p.zone ? { zone: p.zone } : {}),
  criSocket: CRI_SOCKET,
  patches: PATCHES,
  cgroupV1: p.join.cgroupV1,
});

/** Path in the node → content. */
export function systemdNodeFiles(p: SystemdNodeUnitsPlan): Record<string, string> {
  return {
    '/etc/containerd/config.toml': containerdToml(p.sandboxImage),
    '/etc/cni/net.d/10-kube-runbook.conflist': bridgeCniConfig(`kr-${p.node}`, p.podCidr),
    '/etc/systemd/system/containerd.service': containerdService(p.containerdDir),
    '/usr/lib/systemd/system/kubelet.service': KUBELET_SERVICE,
    '/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf': KUBEADM_DROP_IN,
    [SYSTEMD_NODE_JOIN_CONFIG]: joinConfig({ ...p.join, node: systemdKubeadmNode(p) }),
    // kubeadm's default for the kubelet: the systemd cgroup driver, as containerd's
    [`${PATCHES}/${KUBELET_PATCH_FILE}`]: stringify({ cgroupDriver: 'systemd', containerRuntimeEndpoint: `unix://${CRI_SOCKET}` }),
  };
}

/** Symbolic links in the node → their targets: the release's binaries where kubeadm's packages put them, enabled units. */
function systemdNodeLinks(p: SystemdNodeUnitsPlan): Record<string, string> {
  const wants = '/etc/systemd/system/multi-user.target.wants';
  return {
    '/usr/bin/kubelet': `${p.kubernetesDir}/kubelet`,
    '/usr/bin/kubeadm': `${p.kubernetesDir}/kubeadm`,
    '/usr/local/bin/ctr': `${p.containerdDir}/ctr`,
    [`${wants}/containerd.service`]: '/etc/systemd/system/containerd.service',
    [`${wants}/kubelet.service`]: '/usr/lib/systemd/system/kubelet.service',
  };
}

/** Writes the files and links into the node's overlay `upper` (again: replaced). */
export async function writeSystemdNodeFiles(upper: string, p: SystemdNodeUnitsPlan): Promise<void> {
  for (const [path, text] of Object.entries(systemdNodeFiles(p))) {
    await mkdir(dirname(join(upper, path)), { recursive: true });
    await writeFile(join(upper, path), text);
  }
  for (const [path, target] of Object.entries(systemdNodeLinks(p))) {
    await mkdir(dirname(join(upper, path)), { recursive: true });
    await rm(join(upper, path), { force: true });
    await symlink(target, join(upper, path));
  }
}
