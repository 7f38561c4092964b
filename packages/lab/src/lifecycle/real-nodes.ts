import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { start } from './control.js';
import { have, must, mustSh, sh } from '../host/host.js';
import type { LabNodeInfo } from '../host/info.js';
import { writeKubeconfig } from '../host/kubeconfig.js';
import { hierarchies, makeNodeCgroup, missingControllers } from '../host/node-cgroup.js';
import { machineRunDir, type LabNames } from '../host/paths.js';
import { saveKubeletSysctls } from '../host/sysctls.js';
import { kubeletCertName, SERVICE_IP, type LabPki } from '../host/pki.js';
import { goDuration, type LabSettings } from '../host/settings.js';
import type { RealNodeBinaries } from '../install/real-nodes.js';
import type { LabImage } from '../install/images.js';
import {
  cniConfig,
  containerdConfig,
  KUBELET_HEALTHZ_PORT,
  kubeletArgs,
  kubeletConfig,
  realNodePaths,
  realPodCidr,
  type RealNodePlan,
} from './real-node-config.js';
import { httpGet, writeService, type ServiceSpec } from './services.js';
import { kubeadmKubeletCommand } from './kubeadm-config.js';

/** Where the machine's facts are read (tests point them at fakes). */
export interface MachineFacts {
  cgroupBase?: string;
  filesystemsFile?: string;
}

/** What this machine lacks for real nodes (before anything is made); empty when nothing. */
export async function realNodeProblems(m: MachineFacts = {}): Promise<string[]> {
  const problems = missingControllers(await hierarchies(m.cgroupBase));
  const fs = await readFile(m.filesystemsFile ?? '/proc/filesystems', 'utf8').catch(() => '');
  if (!/\toverlay$/m.test(fs)) problems.push("the overlay filesystem (containerd's overlayfs snapshotter; `modprobe overlay`)");
  for (const tool of ['nsenter', 'umount']) if (!(await have(tool))) problems.push(`the ${tool} command`);
  return problems;
}

/** Refuses (exit 2) with every missing thing named. */
export async function checkRealNodes(m: MachineFacts = {}): Promise<void> {
  const problems = await realNodeProblems(m);
  if (problems.length)
    throw new KrError(
      'LAB_REAL_NODE_MISSING',
      `--real-nodes needs ${problems.join(', ')}; this machine does not have ${problems.length > 1 ? 'them' : 'it'}`,
      {
        exit: EXIT.invalid,
        details: ['Simulated nodes (--nodes) need none of this.'],
      },
    );
}

export interface RealNode {
  plan: RealNodePlan;
  containerd: ServiceSpec;
  kubelet: ServiceSpec;
  /** Images imported besides the pause, workload and agent images (a static-pod control plane's). */
  images?: LabImage[];
  /** Names the imported images are tagged with too (kubeadm's: `registry.k8s.io/kube-apiserver:v1.37.2`), from → to. */
  tags?: [string, string][];
  /** Where the node's pods reach the apiserver at the `kubernetes` Service's address. */
  apiserverUrl: string;
}

export interface RealNodesContext {
  instance: string;
  names: LabNames;
  serviceDir(node: string, service: string): string;
  runDir: string;
  pki: LabPki;
  settings: LabSettings;
  apiserverUrl: string;
  bin: RealNodeBinaries;
  /** Control-plane nodes of `--static-pods`: their kubelet's staticPodPath and the images of its static pods. */
  staticPods?: Record<string, { manifests: string; images: LabImage[] }>;
  /** Pod network of the first node: realPodCidr(firstIndex) (default 1). */
  firstIndex?: number;
  /**
   * Nodes made by kubeadm (`lab up --kubeadm`): each node's mount namespace (host/mount-ns.ts), which its containerd
   * and kubelet run in, and the names its images get too. The kubelet runs as kubeadm's drop-in runs it, from the
   * files kubeadm writes; the lab writes no kubelet configuration nor kubeconfig of its own.
   */
  kubeadm?: { mountNs: Record<string, string>; tags: [string, string][] };
}

/** Writes each real node's cgroup, directories, configs, kubeconfig and its containerd and kubelet services. */
export async function writeRealNodes(c: RealNodesContext, nodes: LabNodeInfo[]): Promise<RealNode[]> {
  const h = await hierarchies();
  if (!h) throw new KrError('LAB_REAL_NODE_MISSING', 'real nodes need a cgroup hierarchy under /sys/fs/cgroup', { exit: EXIT.invalid });
  const out: RealNode[] = [];
  for (const [i, n] of nodes.entries()) {
    const dir = join(c.serviceDir(n.name, 'kubelet'), '..');
    const plan: RealNodePlan = {
      instance: c.instance,
      node: n.name,
      netns: n.netns,
      ip: n.ip,
      zone: n.zone,
      podCidr: realPodCidr(i + (c.firstIndex ?? 1)),
      dir,
      runDir: join(c.runDir, n.name),
      cgroup: c.names.nodeCgroup(n.name),
      caFile: c.pki.caCert,
      certFile: c.pki.cert(kubeletCertName(n.name)),
      keyFile: c.pki.key(kubeletCertName(n.name)),
      leaseDurationSeconds: Math.max(1, Math.round(c.settings.leaseDuration / 1000)),
      statusUpdateFrequency: goDuration(c.settings.leaseRenewInterval),
      statusReportFrequency: goDuration(c.settings.nodeStatusReportFrequency),
      bin: c.bin,
      ...(c.staticPods?.[n.name] && !c.kubeadm ? { staticPodPath: c.staticPods[n.name]!.manifests } : {}),
    };
    const mountNs = c.kubeadm?.mountNs[n.name];
    const f = realNodePaths(plan);
    for (const d of [f.containerdRoot, f.kubeletRoot, f.podLogs, f.cniConfDir, f.cniIpamDir]) await mkdir(d, { recursive: true });
    await mkdir(plan.runDir, { recursive: true, mode: 0o711 });
    const cgroups = await makeNodeCgroup(h, plan.cgroup);
    const containerd: ServiceSpec = {
      instance: c.instance,
      node: n.name,
      service: 'containerd',
      dir: c.serviceDir(n.name, 'containerd'),
      netns: n.netns,
      netOnly: true,
      ...(mountNs ? { mountNs } : {}),
      cgroups: cgroups.system,
      command: [c.bin.containerd.containerd, `--config=${join(c.serviceDir(n.name, 'containerd'), 'config.toml')}`],
      // the shim is found on PATH
      env: { PATH: `${c.bin.containerd.dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin` },
      health: `${shq(c.bin.containerd.ctr)} --address ${shq(f.socket)} --timeout 2s version >/dev/null 2>&1`,
      stopTimeoutSec: 10,
    };
    const kubeletDir = c.serviceDir(n.name, 'kubelet');
    const kubelet: ServiceSpec = {
      instance: c.instance,
      node: n.name,
      service: 'kubelet',
      dir: kubeletDir,
      netns: n.netns,
      netOnly: true,
      ...(mountNs ? { mountNs } : {}),
      cgroups: cgroups.kubelet,
      command: mountNs
        ? kubeadmKubeletCommand(c.bin.kubelet)
        : kubeletArgs(plan, join(kubeletDir, 'kubeconfig'), join(kubeletDir, 'config.yaml')),
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
      health: `${httpGet(`http://${n.ip}:${KUBELET_HEALTHZ_PORT}/healthz`)} | grep -qx ok`,
      stopTimeoutSec: 10,
      // as kubeadm's kubelet unit (Restart=always): a kubelet that finds no CRI socket yet exits, at a boot that starts
      // it beside containerd, say, and comes back once containerd serves
      restart: true,
    };
    await writeService(containerd);
    await writeService(kubelet);
    await writeFile(join(containerd.dir, 'config.toml'), containerdConfig(plan));
    await writeFile(join(f.cniConfDir, '10-lab.conflist'), cniConfig(plan));
    if (!mountNs) {
      await writeFile(join(kubeletDir, 'config.yaml'), kubeletConfig(plan));
      await writeKubeconfig(join(kubeletDir, 'kubeconfig'), {
        context: c.names.context,
        server: c.apiserverUrl,
        caFile: c.pki.caCert,
        userName: `${c.names.context}-${n.name}`,
        user: { token: c.pki.tokens[`system:node:${n.name}`]! },
      });
    }
    out.push({
      plan,
      containerd,
      kubelet,
      apiserverUrl: c.apiserverUrl,
      ...(c.staticPods?.[n.name] ? { images: c.staticPods[n.name]!.images } : {}),
      ...(c.kubeadm ? { tags: c.kubeadm.tags } : {}),
    });
  }
  return out;
}

/**
 * Starts each node's containerd, imports the images into it, then starts its kubelet. A containerd that does not
 * start is bad input (exit 2), quoted from its log.
 */
export async function startRealNodes(nodes: RealNode[], o: { clock: Clock; log: Logger; signal?: AbortSignal }): Promise<void> {
  for (const n of nodes) await start(n.containerd.dir);
  for (const n of nodes) await waitContainerd(n, o.clock, o.signal);
  for (const n of nodes) {
    const f = realNodePaths(n.plan);
    const ctr = (args: string[]) =>
      must('LAB_IMAGE_IMPORT_FAILED', n.plan.bin.containerd.ctr, ['--address', f.socket, '--namespace', 'k8s.io', 'images', ...args], {
        timeoutMs: 120_000,
        signal: o.signal,
      });
    const { agentImage, executorImage } = n.plan.bin;
    const base = (img: LabImage) => ['--base-name', img.ref.slice(0, img.ref.lastIndexOf(':')), img.archive];
    for (const img of [n.plan.bin.images.pause, n.plan.bin.images.workload, agentImage, ...(n.images ?? [])])
      await ctr(['import', ...base(img)]);
    // the executor's (the Job of `kube-runbook manifests`) left packed: containerd's CRI unpacks an image when it first
    // creates a container of it, so only the node the Job runs on pays for it (about 1 s a node instead of 4)
    await ctr(['import', '--no-unpack', ...base(executorImage)]);
    // each also as the code names it when nothing else is said (an inventory's default agent image, the default
    // --image of `manifests`): present, they are never pulled
    for (const img of [agentImage, executorImage]) await ctr(['tag', '--force', img.ref, img.recipe.alias]);
    for (const [from, to] of n.tags ?? []) await ctr(['tag', '--force', from, to]);
    o.log.debug(`${n.plan.node}: images imported`);
  }
  for (const n of nodes) await routeKubernetesService(n, o.signal);
  // a kubelet sets machine-wide kernel settings at start: `lab down` of the last real node puts them back
  await saveKubeletSysctls(machineRunDir());
  for (const n of nodes) await start(n.kubelet.dir);
}

/**
 * The `kubernetes` Service's address, which the kubelet tells every pod (KUBERNETES_SERVICE_HOST, port 443), led
 * to the apiserver in the node's namespace: what kube-proxy would do for that one Service (the lab runs none), so
 * in-cluster clients (the node agents, the executor's Job) reach the apiserver from real nodes. OUTPUT for pods on
 * the node's network (hostNetwork), PREROUTING for those behind its CNI bridge; the apiserver's certificate names
 * the address. The rules go with the node's namespace.
 */
async function routeKubernetesService(n: RealNode, signal?: AbortSignal): Promise<void> {
  const api = new URL(n.apiserverUrl);
  const to = `${api.hostname.replace(/^\[(.*)\]$/, '$1')}:${api.port || '443'}`;
  const ns = `ip netns exec ${shq(n.plan.netns)}`;
  const rule = (chain: string) =>
    `${ns} iptables -w 10 -t nat -A ${chain} -d ${SERVICE_IP}/32 -p tcp --dport 443 -j DNAT --to-destination ${shq(to)}`;
  // a route first: a connection is routed before OUTPUT's DNAT, and the node's namespace has no default route
  const script = `set -e
dev=$(${ns} ip -o route get ${shq(api.hostname.replace(/^\[(.*)\]$/, '$1'))} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')
${ns} ip route replace ${SERVICE_IP}/32 dev "$dev"
${rule('OUTPUT')}
${rule('PREROUTING')}
`;
  await mustSh('LAB_REAL_NODE_RUNTIME', `routing the kubernetes Service on ${n.plan.node}`, script, { timeoutMs: 30_000, signal });
}

async function waitContainerd(n: RealNode, clock: Clock, signal?: AbortSignal): Promise<void> {
  const deadline = clock.now() + 30_000;
  for (;;) {
    if ((await sh(shq(join(n.containerd.dir, 'health')))).code === 0) return;
    const running = (await sh(shq(join(n.containerd.dir, 'status')))).code === 0;
    if (!running || clock.now() > deadline) {
      const log = (await readFile(join(n.containerd.dir, 'log'), 'utf8').catch(() => '')).trim().split('\n').filter(Boolean).slice(-6);
      throw new KrError(
        'LAB_REAL_NODE_RUNTIME',
        `containerd of ${n.plan.node} ${running ? 'did not answer within 30s' : 'exited at start'}`,
        {
          exit: EXIT.invalid,
          details: log.map((l) => `  ${l.slice(0, 300)}`),
        },
      );
    }
    await clock.sleep(200, signal);
  }
}
