import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { podCidrOf } from '../sim/objects.js';
import { cniConfig, containerdConfig, kubeletArgs, kubeletConfig, realPodCidr, type RealNodePlan } from './real-node-config.js';
import { runtimeImages } from '../install/runtime-images.js';

const plan: RealNodePlan = {
  instance: 'rn',
  node: 'rnode-2',
  netns: 'kr-rn-rnode-2',
  ip: '10.213.1.212',
  zone: 'zone-b',
  podCidr: realPodCidr(2),
  dir: '/st/rn/nodes/rnode-2',
  runDir: '/run/kube-runbook/rn/rnode-2',
  cgroup: 'kube-runbook-rn-rnode-2',
  caFile: '/st/rn/pki/ca.crt',
  certFile: '/st/rn/pki/kubelet-rnode-2.crt',
  keyFile: '/st/rn/pki/kubelet-rnode-2.key',
  leaseDurationSeconds: 8,
  statusUpdateFrequency: '2s',
  statusReportFrequency: '1m',
  bin: {
    kubelet: '/cache/kubernetes-1.37.2/kubelet',
    containerd: {
      dir: '/cache/containerd-2.4.2',
      version: '2.4.2',
      containerd: '/cache/containerd-2.4.2/containerd',
      ctr: '/cache/containerd-2.4.2/ctr',
      shim: '/cache/containerd-2.4.2/containerd-shim-runc-v2',
    },
    runc: '/usr/sbin/runc',
    cniBinDir: '/usr/lib/cni',
    images: {
      pause: { ref: 'localhost/kube-runbook/pause:3.10.2', archive: '/cache/images/pause.oci.tar' },
      workload: { ref: 'localhost/kube-runbook/busybox:lab', archive: '/cache/images/busybox.oci.tar' },
    },
    agentImage: {
      ref: 'localhost/kube-runbook/kube-runbook-agent:0.1.0',
      archive: '/cache/images/agent.oci.tar',
      recipe: runtimeImages('0.1.0')[1]!,
    },
    executorImage: {
      ref: 'localhost/kube-runbook/kube-runbook:0.1.0',
      archive: '/cache/images/executor.oci.tar',
      recipe: runtimeImages('0.1.0')[0]!,
    },
  },
};

describe("a real node's configuration", () => {
  it("of a static-pod control plane: the kubelet runs kubeadm's manifests directory and registers with its control-plane taint", () => {
    const cfg = parse(kubeletConfig({ ...plan, node: 'cp-1', staticPodPath: '/st/rn/nodes/cp-1/kubernetes/manifests' })) as Record<
      string,
      unknown
    >;
    expect(cfg.staticPodPath).toBe('/st/rn/nodes/cp-1/kubernetes/manifests');
    expect(cfg.registerWithTaints).toEqual([{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }]);
    const worker = parse(kubeletConfig(plan)) as Record<string, unknown>;
    expect(worker).not.toHaveProperty('staticPodPath');
    expect(worker).not.toHaveProperty('registerWithTaints');
  });

  it("keeps containerd's state, sockets, runc state and pods' network namespaces in the node's own directories", () => {
    const toml = containerdConfig(plan);
    expect(toml).toContain('version = 3\n');
    expect(toml).toContain('root = "/st/rn/nodes/rnode-2/containerd"');
    expect(toml).toContain('state = "/run/kube-runbook/rn/rnode-2/containerd"');
    expect(toml).toContain('[grpc]\naddress = "/run/kube-runbook/rn/rnode-2/containerd.sock"');
    expect(toml).toContain('socket_dir = "/run/kube-runbook/rn/rnode-2/s"');
    expect(toml).toContain('Root = "/run/kube-runbook/rn/rnode-2/runc"');
    expect(toml).toContain('netns_mounts_under_state_dir = true');
    expect(toml).toContain('SystemdCgroup = false');
    expect(toml).toContain('"io.containerd.nri.v1.nri"');
    // the sandbox image is the local pause image, which no registry serves
    expect(toml).toContain('sandbox = "localhost/kube-runbook/pause:3.10.2"');
    // shim socket paths stay under the 107 bytes of a unix socket path
    expect('/run/kube-runbook/rn/rnode-2/s/'.length + 64).toBeLessThan(108);
  });

  it("gives each node a pod network of its own, apart from the simulator's", () => {
    expect(realPodCidr(1)).toBe('100.96.1.0/24');
    expect(realPodCidr(2)).not.toBe(podCidrOf(2));
    const cni = JSON.parse(cniConfig(plan)) as {
      name: string;
      plugins: { type: string; ipam: { ranges: { subnet: string }[][]; dataDir: string } }[];
    };
    expect(cni.name).toBe('kr-rn-rnode-2');
    expect(cni.plugins[0]).toMatchObject({ type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: true });
    expect(cni.plugins[0]!.ipam.ranges[0]![0]!.subnet).toBe('100.96.2.0/24');
    expect(cni.plugins[0]!.ipam.dataDir).toBe('/st/rn/nodes/rnode-2/cni-ipam');
  });

  it('runs the kubelet on cgroupfs under its own cgroup, on cgroup v1 or v2, serving on its address', () => {
    const k = parse(kubeletConfig(plan)) as Record<string, unknown>;
    expect(k).toMatchObject({
      kind: 'KubeletConfiguration',
      cgroupDriver: 'cgroupfs',
      cgroupRoot: '/kube-runbook-rn-rnode-2',
      failCgroupV1: false,
      address: '10.213.1.212',
      port: 10250,
      readOnlyPort: 0,
      containerRuntimeEndpoint: 'unix:///run/kube-runbook/rn/rnode-2/containerd.sock',
      podLogsDir: '/st/rn/nodes/rnode-2/pod-logs',
      nodeLeaseDurationSeconds: 8,
      authorization: { mode: 'Webhook' },
      authentication: { anonymous: { enabled: false }, x509: { clientCAFile: '/st/rn/pki/ca.crt' } },
    });
    const args = kubeletArgs(plan, '/k/kubeconfig', '/k/config.yaml');
    expect(args).toContain('--hostname-override=rnode-2');
    expect(args).toContain('--root-dir=/st/rn/nodes/rnode-2/kubelet-root');
    expect(args).toContain('--node-labels=topology.kubernetes.io/zone=zone-b,topology.kubernetes.io/region=lab');
  });
});
