import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  binaryInImage,
  CONTROL_PLANE_COMPONENTS,
  type ControlPlaneComponent,
  type ControlPlaneImages,
} from '../install/control-plane-images.js';
import * as comp from './components.js';

/**
 * The control plane of `lab up --static-pods`: kubeadm's `/etc/kubernetes` for one control-plane node, under
 * `<state>/nodes/<cp>/kubernetes/`: `manifests/` (the kubelet's staticPodPath) with `etcd.yaml`,
 * `kube-apiserver.yaml`, `kube-controller-manager.yaml` and `kube-scheduler.yaml` as kubeadm writes them
 * (hostNetwork, system-node-critical, hostPath mounts, probes on the ports kubeadm probes), and `admin.conf`,
 * `controller-manager.conf`, `scheduler.conf`. The flags are the lab's own (the same as its host processes),
 * so a static-pod lab behaves as a process lab does.
 */
export const kubernetesDir = (nodeDir: string): string => join(nodeDir, 'kubernetes');
export const manifestsDir = (nodeDir: string): string => join(kubernetesDir(nodeDir), 'manifests');

/** etcd's metrics and health listener, where kubeadm probes it (`--listen-metrics-urls=http://127.0.0.1:2381`). */
const ETCD_METRICS_PORT = 2381;

interface Volume {
  name: string;
  path: string;
  type: 'DirectoryOrCreate' | 'FileOrCreate';
  readOnly: boolean;
}

interface Probe {
  host?: string;
  path: string;
  port: number;
  scheme: 'HTTP' | 'HTTPS';
}

export interface StaticPodPlan {
  /** The component's flags (the lab's host-process command line, its binary first). */
  command: string[];
  volumes: Volume[];
  probe: Probe;
  readiness?: Probe;
  cpu: string;
}

/** The Pod kubeadm writes for a component (`kubeadm init phase control-plane` / `etcd local`). */
function staticPodManifest(c: ControlPlaneComponent, image: string, p: StaticPodPlan, annotations: Record<string, string> = {}): string {
  const probe = (x: Probe, failureThreshold: number) => ({
    failureThreshold,
    httpGet: { ...(x.host ? { host: x.host } : {}), path: x.path, port: x.port, scheme: x.scheme },
    initialDelaySeconds: 10,
    periodSeconds: 10,
    timeoutSeconds: 15,
  });
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...(Object.keys(annotations).length ? { annotations } : {}),
      labels: { component: c, tier: 'control-plane' },
      name: c,
      namespace: 'kube-system',
    },
    spec: {
      containers: [
        {
          command: [binaryInImage(c).split('/').pop(), ...p.command.slice(1)],
          image,
          imagePullPolicy: 'IfNotPresent',
          livenessProbe: probe(p.probe, 8),
          name: c,
          ...(p.readiness ? { readinessProbe: { ...probe(p.readiness, 3), initialDelaySeconds: 0, periodSeconds: 1 } } : {}),
          resources: { requests: { cpu: p.cpu } },
          startupProbe: probe(p.probe, 24),
          volumeMounts: p.volumes.map((v) => ({ mountPath: v.path, name: v.name, ...(v.readOnly ? { readOnly: true } : {}) })),
        },
      ],
      hostNetwork: true,
      priority: 2000001000,
      priorityClassName: 'system-node-critical',
      securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
      volumes: p.volumes.map((v) => ({ hostPath: { path: v.path, type: v.type }, name: v.name })),
    },
    status: {},
  };
  return stringify(pod);
}

/** Each component's manifest for control-plane member `c` (one-member labs only). */
export function staticPodManifests(
  c: comp.ComponentContext,
  images: ControlPlaneImages,
  nodeDir: string,
): Record<ControlPlaneComponent, string> {
  const k8s = kubernetesDir(nodeDir);
  const certs: Volume = { name: 'k8s-certs', path: c.pki.dir, type: 'DirectoryOrCreate', readOnly: true };
  const ca: Volume = { name: 'ca-certs', path: '/etc/ssl/certs', type: 'DirectoryOrCreate', readOnly: true };
  const kubeconfig = (file: string): Volume => ({ name: 'kubeconfig', path: join(k8s, file), type: 'FileOrCreate', readOnly: true });
  // the controllers read their kubeconfig from kubeadm's place, not from the lab service's directory
  const withKubeconfig = (cmd: string[], file: string) =>
    cmd.map((a) => a.replace(/^(--(?:authentication-|authorization-)?kubeconfig=).*$/, `$1${join(k8s, file)}`));
  const etcd = comp.etcdService(c).command;
  const etcdData = etcd.find((a) => a.startsWith('--data-dir='))!.slice('--data-dir='.length);
  const plans: Record<ControlPlaneComponent, StaticPodPlan> = {
    etcd: {
      command: [...etcd, `--listen-metrics-urls=http://127.0.0.1:${ETCD_METRICS_PORT}`],
      volumes: [{ name: 'etcd-data', path: etcdData, type: 'DirectoryOrCreate', readOnly: false }],
      probe: { host: '127.0.0.1', path: '/health?exclude=NOSPACE&serializable=true', port: ETCD_METRICS_PORT, scheme: 'HTTP' },
      cpu: '100m',
    },
    'kube-apiserver': {
      // with --tls-cert-file given, --cert-dir is never written: the lab service's directory is not mounted
      command: comp.apiserverService(c).command.filter((a) => !a.startsWith('--cert-dir=')),
      volumes: [ca, certs],
      probe: { host: c.cpIp, path: '/livez', port: comp.APISERVER_PORT, scheme: 'HTTPS' },
      readiness: { host: c.cpIp, path: '/readyz', port: comp.APISERVER_PORT, scheme: 'HTTPS' },
      cpu: '250m',
    },
    'kube-controller-manager': {
      command: withKubeconfig(comp.controllerManagerService(c).command, 'controller-manager.conf'),
      volumes: [ca, certs, kubeconfig('controller-manager.conf')],
      probe: { host: '127.0.0.1', path: '/healthz', port: 10257, scheme: 'HTTPS' },
      cpu: '200m',
    },
    'kube-scheduler': {
      command: withKubeconfig(comp.schedulerService(c).command, 'scheduler.conf'),
      // the lab's kubeconfigs name the certificates' files rather than embed them
      volumes: [certs, kubeconfig('scheduler.conf')],
      probe: { host: '127.0.0.1', path: '/livez', port: 10259, scheme: 'HTTPS' },
      readiness: { host: '127.0.0.1', path: '/readyz', port: 10259, scheme: 'HTTPS' },
      cpu: '100m',
    },
  };
  const annotations: Record<ControlPlaneComponent, Record<string, string>> = {
    etcd: { 'kubeadm.kubernetes.io/etcd.advertise-client-urls': `http://${c.cpIp}:${comp.ETCD_PORT}` },
    'kube-apiserver': { 'kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint': `${c.cpIp}:${comp.APISERVER_PORT}` },
    'kube-controller-manager': {},
    'kube-scheduler': {},
  };
  return Object.fromEntries(
    CONTROL_PLANE_COMPONENTS.map((x) => [x, staticPodManifest(x, images[x].ref, plans[x], annotations[x])]),
  ) as Record<ControlPlaneComponent, string>;
}

/**
 * Writes `<nodeDir>/kubernetes/manifests/<component>.yaml` of `which` components (default all). `lab up` writes etcd
 * and the apiserver first and the controllers once the apiserver answers: their manifests are the same as kubeadm's,
 * but a controller started before the apiserver exits, and the kubelet's crash-loop back-off, which it keeps per pod
 * UID, would then delay every later restart of it (an action's revert included).
 */
export async function writeStaticPods(
  c: comp.ComponentContext,
  images: ControlPlaneImages,
  nodeDir: string,
  which: readonly ControlPlaneComponent[] = CONTROL_PLANE_COMPONENTS,
): Promise<string> {
  const dir = manifestsDir(nodeDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const manifests = staticPodManifests(c, images, nodeDir);
  for (const x of which) await writeFile(join(dir, `${x}.yaml`), manifests[x], { mode: 0o600 });
  return dir;
}
