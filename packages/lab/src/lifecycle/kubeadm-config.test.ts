import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { resolveSettings } from '../host/settings.js';
import {
  bootstrapToken,
  caCertHash,
  initConfig,
  joinConfig,
  kubeadmKubeletCommand,
  kubeletPatch,
  systemctlShim,
  type KubeadmNode,
} from './kubeadm-config.js';

const cp: KubeadmNode = {
  name: 'cp-1',
  ip: '10.213.1.2',
  criSocket: '/run/kube-runbook/kb/cp-1/containerd.sock',
  patches: '/st/kb/nodes/cp-1/kubeadm/patches',
  cgroupV1: true,
};
const settings = resolveSettings({ kubeadm: true, realNodes: 2, grace: '8s', toleration: '30s' });
type Arg = { name: string; value: string };
interface Registration {
  criSocket: string;
  imagePullPolicy: string;
  kubeletExtraArgs: Arg[];
  ignorePreflightErrors?: string[];
}
interface Init {
  apiVersion: string;
  localAPIEndpoint: unknown;
  nodeRegistration: Registration;
  skipPhases: string[];
  bootstrapTokens: { token: string }[];
  certificateKey?: string;
}
interface Cluster {
  kubernetesVersion: string;
  controlPlaneEndpoint: string;
  networking: { serviceSubnet: string };
  etcd: { local: { dataDir: string; extraArgs: Arg[] } };
  controllerManager: { extraArgs: Arg[] };
  scheduler?: { extraArgs: Arg[] };
  apiServer: { extraArgs: Arg[] };
}
interface Join {
  kind: string;
  discovery: { bootstrapToken: unknown };
  nodeRegistration: Registration;
}
const argsOf = (list: Arg[]) => Object.fromEntries(list.map((a) => [a.name, a.value]));

describe("lab up --kubeadm's kubeadm configuration", () => {
  it("gives kubeadm init the lab's node, images policy, skipped addons and the lab's controller settings as extraArgs", () => {
    const docs = parseAllDocuments(
      initConfig({ instance: 'kb', clusterName: 'lab-kb', version: '1.37.2', cp, settings, controlPlaneEndpoint: '10.213.1.2:6443' }),
    ).map((d) => d.toJS() as Record<string, unknown>);
    expect(docs.map((d) => d.kind)).toEqual(['InitConfiguration', 'ClusterConfiguration', 'KubeletConfiguration']);
    const [init, cluster, kubelet] = docs as unknown as [Init, Cluster, Record<string, unknown>];
    expect(init.apiVersion).toBe('kubeadm.k8s.io/v1beta4');
    expect(init.localAPIEndpoint).toEqual({ advertiseAddress: '10.213.1.2', bindPort: 6443 });
    expect(init.nodeRegistration.criSocket).toBe('unix:///run/kube-runbook/kb/cp-1/containerd.sock');
    expect(init.nodeRegistration.imagePullPolicy).toBe('Never');
    expect(argsOf(init.nodeRegistration.kubeletExtraArgs)).toEqual({
      'node-ip': '10.213.1.2',
      'node-labels': 'topology.kubernetes.io/region=lab',
      'maximum-dead-containers-per-container': '10',
    });
    expect(init.nodeRegistration.ignorePreflightErrors).toEqual(['SystemVerification']);
    expect(init.skipPhases).toEqual(['addon/coredns', 'addon/kube-proxy']);
    expect(init.bootstrapTokens[0]?.token).toBe(bootstrapToken('kb'));
    expect(cluster.kubernetesVersion).toBe('v1.37.2');
    expect(cluster.controlPlaneEndpoint).toBe('10.213.1.2:6443');
    expect(cluster.networking.serviceSubnet).toBe('10.96.0.0/16');
    // kubeadm's default, /var/lib/etcd, which each node's mount namespace binds to its own directory
    expect(cluster.etcd.local.dataDir).toBeUndefined();
    expect(init.certificateKey).toBeUndefined();
    expect(argsOf(cluster.controllerManager.extraArgs)).toMatchObject({
      'node-monitor-grace-period': '8s',
      'node-monitor-period': '1s',
      'node-eviction-rate': '0.1',
      'unhealthy-zone-threshold': '0.55',
    });
    expect(argsOf(cluster.apiServer.extraArgs)).toEqual({
      'default-not-ready-toleration-seconds': '30',
      'default-unreachable-toleration-seconds': '30',
    });
    expect(kubelet).toMatchObject({
      cgroupDriver: 'cgroupfs',
      failCgroupV1: false,
      nodeLeaseDurationSeconds: 8,
      nodeStatusUpdateFrequency: '2s',
    });
  });

  it("with --prometheus, serves etcd's, the controller-manager's and the scheduler's metrics on the member's address; kubeadm's own binds otherwise", () => {
    const cluster = (prometheus: boolean) =>
      parseAllDocuments(
        initConfig({
          instance: 'kb',
          clusterName: 'lab-kb',
          version: '1.37.2',
          cp,
          settings: resolveSettings({ kubeadm: true, realNodes: 1, prometheus }),
          controlPlaneEndpoint: '10.213.1.2:6443',
        }),
      )[1]!.toJS() as Cluster;
    const on = cluster(true);
    expect(argsOf(on.etcd.local.extraArgs)['listen-metrics-urls']).toBe('http://0.0.0.0:2381');
    expect(argsOf(on.controllerManager.extraArgs)['bind-address']).toBe('0.0.0.0');
    expect(argsOf(on.scheduler!.extraArgs)).toEqual({ 'bind-address': '0.0.0.0' });
    const off = cluster(false);
    expect(argsOf(off.etcd.local.extraArgs)['listen-metrics-urls']).toBeUndefined();
    expect(argsOf(off.controllerManager.extraArgs)['bind-address']).toBeUndefined();
    expect(off.scheduler).toBeUndefined();
  });

  it('joins a worker by the bootstrap token with the CA pinned, in its zone', () => {
    const join = parse(
      joinConfig({
        instance: 'kb',
        apiserver: '10.213.1.2:6443',
        caHash: 'sha256:ab',
        node: { ...cp, name: 'rnode-1', ip: '10.213.1.211', zone: 'zone-a' },
      }),
    ) as Join;
    expect(join.kind).toBe('JoinConfiguration');
    expect(join.discovery.bootstrapToken).toEqual({
      apiServerEndpoint: '10.213.1.2:6443',
      token: bootstrapToken('kb'),
      caCertHashes: ['sha256:ab'],
    });
    expect(argsOf(join.nodeRegistration.kubeletExtraArgs)['node-labels']).toBe(
      'topology.kubernetes.io/zone=zone-a,topology.kubernetes.io/region=lab',
    );
  });

  it('makes a token of the form kubeadm accepts, one per instance', () => {
    expect(bootstrapToken('kb')).toMatch(/^[a-z0-9]{6}\.[a-z0-9]{16}$/);
    expect(bootstrapToken('kb')).not.toBe(bootstrapToken('kc'));
  });

  it("hashes the CA's public key as openssl does for --discovery-token-ca-cert-hash", () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-kubeadm-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-subj',
          '/CN=ca',
          '-keyout',
          join(dir, 'k'),
          '-out',
          join(dir, 'c'),
          '-days',
          '1',
        ],
        { stdio: 'ignore' },
      );
      const der = execFileSync('sh', [
        '-c',
        `openssl x509 -in '${join(dir, 'c')}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -hex`,
      ]).toString();
      expect(caCertHash(readFileSync(join(dir, 'c'), 'utf8'))).toBe(`sha256:${/([0-9a-f]{64})/.exec(der)![1]}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("puts the node's own kubelet settings in a patch, and runs the kubelet as kubeadm's drop-in does", () => {
    expect(parse(kubeletPatch({ cgroup: 'kube-runbook-kb-cp-1', podLogs: '/st/logs', criSocket: '/run/c.sock' }))).toEqual({
      cgroupRoot: '/kube-runbook-kb-cp-1',
      podLogsDir: '/st/logs',
      containerRuntimeEndpoint: 'unix:///run/c.sock',
    });
    const out = execFileSync(kubeadmKubeletCommand('echo')[0]!, [...kubeadmKubeletCommand('echo').slice(1), '--v=1']).toString();
    expect(out.trim()).toBe(
      '--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --v=1',
    );
  });
});

describe("kubeadm's systemctl on a lab node", () => {
  it("runs the kubelet service's scripts for the kubelet unit, and refuses any other unit or verb", () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-systemctl-'));
    try {
      for (const s of ['start', 'stop', 'status'])
        writeFileSync(join(dir, s), `#!/bin/sh\necho ${s} >> '${join(dir, 'calls')}'\n`, { mode: 0o755 });
      writeFileSync(join(dir, 'systemctl'), systemctlShim(dir, 'rnode-1'), { mode: 0o755 });
      const ctl = (...a: string[]) => spawnSync(join(dir, 'systemctl'), a, { encoding: 'utf8' });
      for (const a of [
        ['daemon-reload'],
        ['stop', 'kubelet'],
        ['start', 'kubelet.service'],
        ['restart', 'kubelet'],
        ['is-active', 'kubelet'],
        ['is-enabled', 'kubelet'],
      ])
        expect(ctl(...a).status, a.join(' ')).toBe(0);
      expect(readFileSync(join(dir, 'calls'), 'utf8').split('\n').filter(Boolean)).toEqual(['stop', 'start', 'stop', 'start', 'status']);
      expect(ctl('restart', 'containerd').status).toBe(1);
      expect(ctl('mask', 'kubelet').stderr).toContain('not done on this lab node');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('lab up --kubeadm options', () => {
  it('implies static pods and real nodes only, and refuses it without real nodes, with simulated ones or with HA', () => {
    expect(resolveSettings({ kubeadm: true, realNodes: 2 })).toMatchObject({ kubeadm: true, staticPods: true, nodes: 0, realNodes: 2 });
    expect(() => resolveSettings({ kubeadm: true })).toThrow(/--kubeadm must be given with --real-nodes N/);
    expect(() => resolveSettings({ kubeadm: true, realNodes: 1, nodes: 2 })).toThrow(/--kubeadm runs real nodes only \(got --nodes 2\)/);
    expect(resolveSettings({ kubeadm: true, realNodes: 1, controlPlanes: 3 })).toMatchObject({ kubeadm: true, controlPlanes: 3 });
    expect(() => resolveSettings({ staticPods: true, realNodes: 1, controlPlanes: 3 })).toThrow(
      /--static-pods runs one control-plane member \(got --control-planes 3\): for an HA control plane of static pods, give --kubeadm/,
    );
  });
});

describe("an HA kubeadm lab's configuration", () => {
  const key = 'ab'.repeat(32);
  it('makes the VIP the endpoint of init and of every join; the other members join as control-plane members with the key', () => {
    const [init, cluster] = parseAllDocuments(
      initConfig({
        instance: 'kb',
        clusterName: 'lab-kb',
        version: '1.37.2',
        cp,
        settings,
        controlPlaneEndpoint: '10.213.1.254:6443',
        certificateKey: key,
      }),
    ).map((d) => d.toJS() as Record<string, unknown>) as unknown as [Init, Cluster];
    expect(cluster.controlPlaneEndpoint).toBe('10.213.1.254:6443');
    expect(init.certificateKey).toBe(key);
    expect(init.localAPIEndpoint).toEqual({ advertiseAddress: '10.213.1.2', bindPort: 6443 });
    const member = { ...cp, name: 'cp-2', ip: '10.213.1.3' };
    const join = parse(
      joinConfig({ instance: 'kb', apiserver: '10.213.1.254:6443', caHash: 'sha256:00', node: member, certificateKey: key }),
    ) as {
      discovery: { bootstrapToken: { apiServerEndpoint: string } };
      controlPlane: unknown;
    };
    expect(join.discovery.bootstrapToken.apiServerEndpoint).toBe('10.213.1.254:6443');
    expect(join.controlPlane).toEqual({ localAPIEndpoint: { advertiseAddress: '10.213.1.3', bindPort: 6443 }, certificateKey: key });
    const worker = parse(
      joinConfig({ instance: 'kb', apiserver: '10.213.1.254:6443', caHash: 'sha256:00', node: { ...cp, name: 'rnode-1' } }),
    ) as object;
    expect(worker).not.toHaveProperty('controlPlane');
  });
});
