import { readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { systemdNodeFiles, writeSystemdNodeFiles } from './systemd-node-units.js';

const plan = { node: 'sd-1', kubeletDir: '/opt/k8s', containerdDir: '/opt/ctrd' };

describe("a systemd node's units", () => {
  let upper = '';
  tempDirEach('kr-sdunits-', (d) => (upper = d));

  it("are kubeadm's: kubelet.service restarts always, after containerd.service, and serves /healthz where stop-kubelet reads it", () => {
    const f = systemdNodeFiles(plan);
    const kubelet = f['/etc/systemd/system/kubelet.service']!;
    expect(kubelet).toMatch(/^ExecStart=\/opt\/k8s\/kubelet --config=\/etc\/kubernetes\/kubelet\.yaml --hostname-override=sd-1 /m);
    expect(kubelet).toMatch(/^Restart=always$/m);
    expect(kubelet).toMatch(/^After=.*containerd\.service/m);
    expect(kubelet).toMatch(/^WantedBy=multi-user\.target$/m);
    const containerd = f['/etc/systemd/system/containerd.service']!;
    expect(containerd).toMatch(/^ExecStart=\/opt\/ctrd\/containerd --config \/etc\/containerd\/config\.toml$/m);
    // the shim is found on PATH
    expect(containerd).toMatch(/^Environment=PATH=\/opt\/ctrd:/m);
    const config = parse(f['/etc/kubernetes/kubelet.yaml']!) as Record<string, unknown>;
    expect(config).toMatchObject({
      kind: 'KubeletConfiguration',
      healthzBindAddress: '127.0.0.1',
      healthzPort: 10248,
      failCgroupV1: false,
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    });
    expect(f['/etc/containerd/config.toml']).toMatch(/^snapshotter = "native"$/m);
  });

  it('are written into the overlay and enabled for multi-user.target, twice without error', async () => {
    await writeSystemdNodeFiles(upper, plan);
    await writeSystemdNodeFiles(upper, plan);
    expect(await readFile(join(upper, 'etc/systemd/system/kubelet.service'), 'utf8')).toContain('ExecStart=/opt/k8s/kubelet');
    for (const u of ['containerd.service', 'kubelet.service'])
      expect(await readlink(join(upper, 'etc/systemd/system/multi-user.target.wants', u))).toBe(`/etc/systemd/system/${u}`);
  });
});
