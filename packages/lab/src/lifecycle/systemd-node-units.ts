import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { KUBELET_HEALTHZ_PORT } from './real-node-config.js';

/**
 * The files of a systemd node's containerd and kubelet, as kubeadm's packages lay them out: `containerd.service`
 * and `kubelet.service` under /etc/systemd/system, enabled for multi-user.target, `Restart=always` as kubeadm's
 * kubelet unit. The kubelet runs standalone (no kubeconfig): what is checked on such a node is the unit's control
 * (stop, start, health on 127.0.0.1:10248), not its registration. Paths are the node's.
 */
export interface SystemdNodeUnitsPlan {
  node: string;
  /** Directory (in the node) of the kubelet binary. */
  kubeletDir: string;
  /** Directory (in the node) of containerd, ctr and containerd-shim-runc-v2. */
  containerdDir: string;
}

const SYSTEMD_NODE_UNITS = ['containerd.service', 'kubelet.service'] as const;

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * containerd's config: its defaults (/var/lib/containerd, /run/containerd/containerd.sock) but the native
 * snapshotter, as the node's root is itself an overlay, which overlayfs does not take as an upper layer; no NRI;
 * oom_score_adj no lower than containerd's (lowering it needs CAP_SYS_RESOURCE, which a sandboxed machine may not give).
 */
const containerdToml = `version = 3
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[plugins.'io.containerd.cri.v1.images']
snapshotter = "native"

[plugins.'io.containerd.cri.v1.runtime']
enable_cdi = false
restrict_oom_score_adj = true
`;

function kubeletYaml(): string {
  return stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    cgroupDriver: 'cgroupfs',
    failCgroupV1: false,
    failSwapOn: false,
    healthzBindAddress: '127.0.0.1',
    healthzPort: KUBELET_HEALTHZ_PORT,
    readOnlyPort: 0,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '100Mi' },
  });
}

/** Path in the node → content. */
export function systemdNodeFiles(p: SystemdNodeUnitsPlan): Record<string, string> {
  return {
    '/etc/containerd/config.toml': containerdToml,
    '/etc/kubernetes/kubelet.yaml': kubeletYaml(),
    '/etc/systemd/system/containerd.service': `[Unit]
Description=containerd container runtime
After=network.target local-fs.target

[Service]
Environment=PATH=${p.containerdDir}:${PATH}
ExecStart=${p.containerdDir}/containerd --config /etc/containerd/config.toml
Type=simple
Delegate=yes
KillMode=process
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`,
    '/etc/systemd/system/kubelet.service': `[Unit]
Description=kubelet: The Kubernetes Node Agent
Wants=network-online.target containerd.service
After=network-online.target containerd.service

[Service]
ExecStart=${p.kubeletDir}/kubelet --config=/etc/kubernetes/kubelet.yaml --hostname-override=${p.node} --v=1
Restart=always
StartLimitInterval=0
RestartSec=1

[Install]
WantedBy=multi-user.target
`,
  };
}

/** Writes the files into the node's overlay `upper` and enables the units (multi-user.target.wants links). */
export async function writeSystemdNodeFiles(upper: string, p: SystemdNodeUnitsPlan): Promise<void> {
  for (const [path, text] of Object.entries(systemdNodeFiles(p))) {
    await mkdir(dirname(join(upper, path)), { recursive: true });
    await writeFile(join(upper, path), text);
  }
  const wants = join(upper, 'etc/systemd/system/multi-user.target.wants');
  await mkdir(wants, { recursive: true });
  for (const u of SYSTEMD_NODE_UNITS)
    await symlink(`/etc/systemd/system/${u}`, join(wants, u)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e;
    });
}
