import { readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { SYSTEMD_NODE_JOIN_CONFIG, systemdNodeFiles, writeSystemdNodeFiles, type SystemdNodeUnitsPlan } from './systemd-node-units.js';

const plan: SystemdNodeUnitsPlan = {
  node: 'sd-1',
  ip: '10.213.0.252',
  zone: 'zone-a',
  kubernetesDir: '/opt/k8s',
  containerdDir: '/opt/ctrd',
  sandboxImage: 'registry.k8s.io/pause:3.10.1',
  podCidr: '100.96.250.0/24',
  join: { instance: 'sdn', apiserver: '10.213.0.2:6443', caHash: 'sha256:abc', cgroupV1: true },
};

describe("a systemd node's units", () => {
  let upper = '';
  tempDirEach('kr-sdunits-', (d) => (upper = d));

  it("are kubeadm's packages': the bare kubelet unit, the drop-in with kubeadm's files, restarted always", () => {
    const f = systemdNodeFiles(plan);
    const kubelet = f['/usr/lib/systemd/system/kubelet.service']!;
    expect(kubelet).toMatch(/^ExecStart=\/usr\/bin\/kubelet$/m);
    expect(kubelet).toMatch(/^Restart=always$/m);
    expect(kubelet).toMatch(/^WantedBy=multi-user\.target$/m);
    const dropIn = f['/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf']!;
    // the empty ExecStart= resets the unit's before the drop-in's own
    expect(dropIn).toMatch(
      /^ExecStart=\nExecStart=\/usr\/bin\/kubelet \$KUBELET_KUBECONFIG_ARGS \$KUBELET_CONFIG_ARGS \$KUBELET_KUBEADM_ARGS /m,
    );
    expect(dropIn).toContain('EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env');
    expect(dropIn).toContain('--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf');
    const containerd = f['/etc/systemd/system/containerd.service']!;
    expect(containerd).toMatch(/^ExecStart=\/opt\/ctrd\/containerd --config \/etc\/containerd\/config\.toml$/m);
    // the shim is found on PATH
    expect(containerd).toMatch(/^Environment=PATH=\/opt\/ctrd:/m);
  });

  it("give containerd and the kubelet the systemd cgroup driver, the sandbox by kubeadm's name and a pod network", () => {
    const f = systemdNodeFiles(plan);
    const toml = f['/etc/containerd/config.toml']!;
    expect(toml).toMatch(/^snapshotter = "native"$/m);
    expect(toml).toMatch(/^sandbox = "registry\.k8s\.io\/pause:3\.10\.1"$/m);
    expect(toml).toMatch(/runtimes\.runc\.options\]\nSystemdCgroup = true$/m);
    expect(parse(f['/etc/kubernetes/kube-runbook/patches/kubeletconfiguration+merge.yaml']!)).toEqual({
      cgroupDriver: 'systemd',
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    });
    const cni = JSON.parse(f['/etc/cni/net.d/10-kube-runbook.conflist']!) as { plugins: { ipam: { ranges: { subnet: string }[][] } }[] };
    expect(cni.plugins[0]!.ipam.ranges[0]![0]!.subnet).toBe('100.96.250.0/24');
  });

  it('tell kubeadm join the node, its zone, its patches and the bootstrap token discovery', () => {
    const docs = parseAllDocuments(systemdNodeFiles(plan)[SYSTEMD_NODE_JOIN_CONFIG]!).map((d) => d.toJS() as Record<string, unknown>);
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({
      kind: 'JoinConfiguration',
      discovery: { bootstrapToken: { apiServerEndpoint: '10.213.0.2:6443', caCertHashes: ['sha256:abc'] } },
      nodeRegistration: {
        name: 'sd-1',
        criSocket: 'unix:///run/containerd/containerd.sock',
        ignorePreflightErrors: ['SystemVerification'],
        kubeletExtraArgs: expect.arrayContaining([
          { name: 'node-ip', value: '10.213.0.252' },
          { name: 'node-labels', value: 'topology.kubernetes.io/zone=zone-a,topology.kubernetes.io/region=lab' },
        ]),
      },
      patches: { directory: '/etc/kubernetes/kube-runbook/patches' },
    });
  });

  it('are written into the overlay, the binaries linked where the packages put them and the units enabled, twice without error', async () => {
    await writeSystemdNodeFiles(upper, plan);
    await writeSystemdNodeFiles(upper, plan);
    expect(await readFile(join(upper, 'usr/lib/systemd/system/kubelet.service'), 'utf8')).toContain('ExecStart=/usr/bin/kubelet');
    expect(await readlink(join(upper, 'usr/bin/kubelet'))).toBe('/opt/k8s/kubelet');
    expect(await readlink(join(upper, 'usr/bin/kubeadm'))).toBe('/opt/k8s/kubeadm');
    const wants = join(upper, 'etc/systemd/system/multi-user.target.wants');
    expect(await readlink(join(wants, 'containerd.service'))).toBe('/etc/systemd/system/containerd.service');
    expect(await readlink(join(wants, 'kubelet.service'))).toBe('/usr/lib/systemd/system/kubelet.service');
  });
});
