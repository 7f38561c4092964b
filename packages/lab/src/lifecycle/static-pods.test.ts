import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { ComponentContext } from './components.js';
import { resolveSettings } from '../host/settings.js';
import { kubernetesDir, manifestsDir, staticPodManifests } from './static-pods.js';

const pkiDir = '/st/sp/pki';
const c: ComponentContext = {
  instance: 'sp',
  cpNode: 'cp-1',
  cpNetns: 'kr-sp-cp-1',
  cpIp: '10.213.1.2',
  members: [{ name: 'cp-1', ip: '10.213.1.2' }],
  serviceDir: (node, service) => `/st/sp/nodes/${node}/${service}`,
  pki: {
    dir: pkiDir,
    caCert: `${pkiDir}/ca.crt`,
    caKey: `${pkiDir}/ca.key`,
    cert: (n) => `${pkiDir}/${n}.crt`,
    key: (n) => `${pkiDir}/${n}.key`,
    saKey: `${pkiDir}/sa.key`,
    saPub: `${pkiDir}/sa.pub`,
    tokenFile: `${pkiDir}/tokens.csv`,
    tokens: {},
  },
  bin: {
    dir: '/cache/k',
    version: '1.37.2',
    kubeApiserver: '/cache/k/kube-apiserver',
    kubeControllerManager: '/cache/k/kube-controller-manager',
    kubeScheduler: '/cache/k/kube-scheduler',
    etcd: '/cache/k/etcd',
  },
  settings: resolveSettings({ realNodes: 1, staticPods: true }),
  etcdCgroup: { dir: '/sys/fs/cgroup/blkio/kube-runbook-sp-etcd', version: 1, name: 'kube-runbook-sp-etcd', options: 'blkio' },
};
const image = (n: string) => ({ ref: `localhost/kube-runbook/${n}:v1.37.2`, archive: `/cache/images/${n}.oci.tar` });
const images = {
  etcd: image('etcd'),
  'kube-apiserver': image('kube-apiserver'),
  'kube-controller-manager': image('kube-controller-manager'),
  'kube-scheduler': image('kube-scheduler'),
};
const nodeDir = '/st/sp/nodes/cp-1';

interface Pod {
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: {
    hostNetwork: boolean;
    priorityClassName: string;
    containers: {
      name: string;
      image: string;
      command: string[];
      livenessProbe: { httpGet: { host?: string; port: number; path: string; scheme: string } };
      volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
    }[];
    volumes: { name: string; hostPath: { path: string; type: string } }[];
  };
}
const pods = Object.fromEntries(Object.entries(staticPodManifests(c, images, nodeDir)).map(([k, v]) => [k, parse(v) as Pod]));

describe("the static-pod control plane's manifests", () => {
  it("are kubeadm's four kube-system pods on the host network, run from the lab's images by the binary's name", () => {
    expect(Object.keys(pods).sort()).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler']);
    for (const [name, pod] of Object.entries(pods)) {
      expect(pod.metadata).toMatchObject({ name, namespace: 'kube-system', labels: { component: name, tier: 'control-plane' } });
      expect(pod.spec.hostNetwork).toBe(true);
      expect(pod.spec.priorityClassName).toBe('system-node-critical');
      expect(pod.spec.containers[0]!.image).toBe(`localhost/kube-runbook/${name}:v1.37.2`);
      expect(pod.spec.containers[0]!.command[0]).toBe(name);
      // every mount is a hostPath volume of the pod, at the same path
      for (const m of pod.spec.containers[0]!.volumeMounts)
        expect(pod.spec.volumes.find((v) => v.name === m.name)?.hostPath.path).toBe(m.mountPath);
    }
  });

  it("serve etcd's health where kubeadm probes it (127.0.0.1:2381), which the kubeadm layout's start checks", () => {
    const etcd = pods.etcd!.spec.containers[0]!;
    expect(etcd.command).toContain('--listen-metrics-urls=http://127.0.0.1:2381');
    expect(etcd.livenessProbe.httpGet).toMatchObject({ host: '127.0.0.1', port: 2381, scheme: 'HTTP' });
    expect(pods.etcd!.spec.volumes).toContainEqual({
      name: 'etcd-data',
      hostPath: { path: '/st/sp/nodes/cp-1/etcd/data', type: 'DirectoryOrCreate' },
    });
  });

  it("point the controllers at kubeadm's kubeconfigs and mount the lab's certificates read-only", () => {
    const kcm = pods['kube-controller-manager']!.spec.containers[0]!;
    const conf = `${kubernetesDir(nodeDir)}/controller-manager.conf`;
    for (const f of ['--kubeconfig', '--authentication-kubeconfig', '--authorization-kubeconfig'])
      expect(kcm.command).toContain(`${f}=${conf}`);
    expect(kcm.volumeMounts).toContainEqual({ name: 'kubeconfig', mountPath: conf, readOnly: true });
    expect(kcm.volumeMounts).toContainEqual({ name: 'k8s-certs', mountPath: pkiDir, readOnly: true });
    expect(pods['kube-scheduler']!.spec.containers[0]!.command).toContain(`--kubeconfig=${kubernetesDir(nodeDir)}/scheduler.conf`);
    const api = pods['kube-apiserver']!.spec.containers[0]!;
    expect(api.command.some((a) => a.startsWith('--cert-dir='))).toBe(false);
    expect(api.command).toContain(`--tls-cert-file=${pkiDir}/apiserver.crt`);
    expect(manifestsDir(nodeDir)).toBe('/st/sp/nodes/cp-1/kubernetes/manifests');
  });
});

describe('--static-pods', () => {
  it('needs --real-nodes and one control-plane member (exit 2)', () => {
    expect(() => resolveSettings({ staticPods: true })).toThrow(/--static-pods must be given with --real-nodes N/);
    expect(() => resolveSettings({ staticPods: true, realNodes: 1, controlPlanes: 3 })).toThrow(
      /--static-pods runs one control-plane member \(got --control-planes 3\): for an HA/,
    );
    try {
      resolveSettings({ staticPods: true });
    } catch (e) {
      expect((e as { exit?: number }).exit).toBe(2);
    }
  });
});
