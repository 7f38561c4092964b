import { randomBytes } from 'node:crypto';
import { appendFile, chmod, copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { mustSh, sh } from '../host/host.js';
import type { LabNodeInfo } from '../host/info.js';
import { inNode, kubeadmBinds, makeNodeMountNs, mountNsFile } from '../host/mount-ns.js';
import { CONTROL_PLANE_COMPONENTS } from '../install/control-plane-images.js';
import { APISERVER_PORT } from './components.js';
import { caCertHash, initConfig, joinConfig, KUBELET_PATCH_FILE, kubeletPatch, systemctlShim, type KubeadmNode } from './kubeadm-config.js';
import { startRealNodes, writeRealNodes, type RealNode } from './real-nodes.js';
import { realNodePaths } from './real-node-config.js';
import { kubernetesDir } from './static-pods.js';
import { lastLines } from './control.js';
import { component, type LabComponent } from './up-component.js';
import { haproxyBackendsUp } from './up-extras.js';
import { realContext, waitStaticControlPlane } from './up-control-plane.js';
import type { LabPlan } from './up-plan.js';

/**
 * `lab up --kubeadm`: cp-1 and the real workers are real nodes (containerd and the release's kubelet, as with
 * `--real-nodes`), each in a mount namespace of its own where its directories stand at /etc/kubernetes and
 * /var/lib/kubelet; the release's kubeadm makes the control plane on cp-1 (`kubeadm init`) and joins the workers
 * (`kubeadm join`, a bootstrap token and the kubelet's TLS bootstrap). The lab's CA is put in kubeadm's pki first
 * (kubeadm uses a CA it finds), so the lab's admin kubeconfig stays valid; everything else kubeadm makes.
 */

/** A node's kubeadm files on this machine: its configuration, patches and the log of its kubeadm run. */
const kubeadmDir = (p: LabPlan, node: string) => join(p.paths.nodesDir, node, 'kubeadm');

/**
 * Writes a node's kubeadm patch and makes its mount namespace, kubeadm's directories bound to the node's; the node
 * as kubeadm's configuration describes it.
 */
async function prepareNode(p: LabPlan, n: LabNodeInfo, socket: string, podLogs: string): Promise<KubeadmNode> {
  const node: KubeadmNode = {
    name: n.name,
    ip: n.ip,
    ...(n.zone ? { zone: n.zone } : {}),
    criSocket: socket,
    patches: join(kubeadmDir(p, n.name), 'patches'),
    cgroupV1: p.layout.version === 1,
  };
  await mkdir(node.patches, { recursive: true });
  await mkdir(join(kubeadmDir(p, n.name), 'bin'), { recursive: true });
  await writeFile(join(kubeadmDir(p, n.name), 'bin', 'systemctl'), systemctlShim(p.paths.serviceDir(n.name, 'kubelet'), n.name), {
    mode: 0o755,
  });
  await writeFile(join(node.patches, KUBELET_PATCH_FILE), kubeletPatch({ cgroup: p.names.nodeCgroup(n.name), podLogs, criSocket: socket }));
  // a node forwards packets (kubeadm's preflight checks it): the setting is the node's network namespace's own
  await mustSh('LAB_REAL_NODE_RUNTIME', `ip_forward on ${n.name}`, `ip netns exec ${shq(n.netns)} sysctl -qw net.ipv4.ip_forward=1`);
  const root = join(p.paths.nodesDir, n.name);
  await makeNodeMountNs(p.instance, n.name, kubeadmBinds(root));
  return node;
}

/** The images kubeadm names (`kubeadm config images list`), each mapped to the lab's image of that component: from → to. */
async function imageTags(p: LabPlan, kubeadm: string, config: string): Promise<[string, string][]> {
  const r = await sh([kubeadm, 'config', 'images', 'list', '--config', config].map(shq).join(' '), { timeoutMs: 60_000 });
  if (r.code !== 0) throw new KrError('LAB_KUBEADM_FAILED', `kubeadm config images list failed: ${(r.stderr || r.stdout).trim()}`);
  const ours: Record<string, string> = { pause: p.real!.images.pause.ref };
  for (const c of CONTROL_PLANE_COMPONENTS) ours[c] = p.cpImages![c].ref;
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((ref): [string, string] => {
      const name = ref.slice(0, ref.lastIndexOf(':')).split('/').pop()!;
      const from = ours[name];
      if (!from) throw new KrError('LAB_KUBEADM_FAILED', `kubeadm names the image ${ref}, which the lab does not build`);
      return [from, ref];
    });
}

/** Runs kubeadm in node `n`'s namespaces, its output appended to `log`; KrError with its last lines when it fails. */
async function runKubeadm(p: LabPlan, n: LabNodeInfo, argv: string[], log: string): Promise<void> {
  await appendFile(log, `$ kubeadm ${argv.slice(1).join(' ')}\n`);
  // kubeadm finds the lab's systemctl (it stops and starts the kubelet) and the kubelet (its preflight asks its version)
  const path = [
    join(kubeadmDir(p, n.name), 'bin'),
    dirname(p.real!.kubelet),
    '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  ].join(':');
  const r = await sh(`PATH=${shq(path)} ${inNode(n.netns, mountNsFile(p.instance, n.name), argv)} >> ${shq(log)} 2>&1`, {
    timeoutMs: 300_000,
    signal: p.signal,
  });
  if (r.code !== 0) {
    throw new KrError('LAB_KUBEADM_FAILED', `kubeadm ${argv[1]} on ${n.name} failed (exit ${r.code}); its log: ${log}`, {
      exit: EXIT.failed,
      details: lastLines(await readFile(log, 'utf8').catch(() => ''), 15),
    });
  }
}

/**
 * The control plane by kubeadm: cp-1 by `kubeadm init`, then (HA) every other member in turn by `kubeadm join
 * --control-plane`, each member's containerd and kubelet started first (the kubelet waits for kubeadm's files, as
 * the unit does). An HA lab's endpoint is the VIP, whose HAProxy is up before `kubeadm init`: kubeadm talks to the
 * cluster through it from its first call, as in kubeadm's HA guide.
 */
export function kubeadmControlPlane(p: LabPlan): LabComponent {
  const { staticCp, real, cpImages, clock, log, signal } = p;
  if (!staticCp || !cpImages || !real?.kubeadm)
    throw new Error('a kubeadm control plane needs cp-1 as a real node, its images and kubeadm');
  const kubeadm = real.kubeadm;
  const members = p.cpKubelets;
  const joining = members.filter((m) => m !== staticCp);
  // the control plane's certificates go to the joining members encrypted with this key, made for this lab up alone
  const certificateKey = joining.length ? randomBytes(32).toString('hex') : undefined;
  const endpoint = `${p.apiserverHost}:${APISERVER_PORT}`;
  let nodes: RealNode[] = [];
  const configs = new Map<string, string>();
  let tags: [string, string][] | undefined;
  return component({
    name: `${members.map((m) => m.name).join(', ')} by kubeadm ${joining.length ? 'init and join --control-plane' : 'init'}`,
    async write() {
      const root = join(p.paths.nodesDir, staticCp.name);
      const pki = join(kubernetesDir(root), 'pki');
      await mkdir(pki, { recursive: true, mode: 0o700 });
      // kubeadm signs with a CA it finds: the lab's, so the lab's admin kubeconfig and its other clients hold
      await copyFile(p.pki.caCert, join(pki, 'ca.crt'));
      await copyFile(p.pki.caKey, join(pki, 'ca.key'));
      await chmod(join(pki, 'ca.key'), 0o600);
      const caHash = caCertHash(await readFile(p.pki.caCert, 'utf8'));
      nodes = await writeKubeadmNodes(p, members, 200, async (n, socket, podLogs) => {
        const node = await prepareNode(p, n, socket, podLogs);
        const dir = kubeadmDir(p, n.name);
        const file = join(dir, n === staticCp ? 'init.yaml' : 'join.yaml');
        await writeFile(
          file,
          n === staticCp
            ? initConfig({
                instance: p.instance,
                clusterName: p.names.context,
                version: p.bin.version,
                cp: node,
                settings: p.settings,
                controlPlaneEndpoint: endpoint,
                ...(certificateKey ? { certificateKey } : {}),
              })
            : joinConfig({ instance: p.instance, apiserver: endpoint, caHash, node, ...(certificateKey ? { certificateKey } : {}) }),
          { mode: 0o600 },
        );
        configs.set(n.name, file);
        // every member imports the same images under kubeadm's names: asked once, of cp-1's init.yaml (written first)
        tags ??= await imageTags(p, kubeadm, configs.get(staticCp.name)!);
        return tags;
      });
      for (const r of nodes) {
        const n = members.find((m) => m.name === r.plan.node);
        if (n) n.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
      }
    },
    async start() {
      p.step(`${members.map((m) => m.name).join(', ')}: containerd, images and the kubelet, then kubeadm init on ${staticCp.name}`);
      await startRealNodes(nodes, { clock, log, signal });
      const logOf = (n: LabNodeInfo) => join(kubeadmDir(p, n.name), 'kubeadm.log');
      await runKubeadm(
        p,
        staticCp,
        [kubeadm, 'init', '--config', configs.get(staticCp.name)!, ...(certificateKey ? ['--upload-certs'] : [])],
        logOf(staticCp),
      );
      // one member at a time: each joins etcd as a learner and is promoted before the next one comes
      if (joining.length) await waitStaticControlPlane(staticCp.ip, p.pki.caCert, clock, signal);
      for (const m of joining) {
        p.step(`${m.name}: kubeadm join --control-plane`);
        await runKubeadm(p, m, [kubeadm, 'join', '--config', configs.get(m.name)!], logOf(m));
      }
    },
    async ready() {
      for (const m of members) await waitStaticControlPlane(m.ip, p.pki.caCert, clock, signal);
      // the VIP serves from every member
      if (p.lb) await haproxyBackendsUp(p);
    },
  });
}

/** The real workers by `kubeadm join`. */
export function kubeadmWorkers(p: LabPlan): LabComponent {
  const real = p.real!;
  const kubeadm = real.kubeadm!;
  let nodes: RealNode[] = [];
  const configs = new Map<string, string>();
  return component({
    name: 'real nodes by kubeadm join',
    async write() {
      const caHash = caCertHash(await readFile(p.pki.caCert, 'utf8'));
      const pause = await pauseName(kubeadm, p.bin.version);
      nodes = await writeKubeadmNodes(p, p.realInfos, 1, async (n, socket, podLogs) => {
        const node = await prepareNode(p, n, socket, podLogs);
        const file = join(kubeadmDir(p, n.name), 'join.yaml');
        await writeFile(file, joinConfig({ instance: p.instance, apiserver: `${p.apiserverHost}:${APISERVER_PORT}`, caHash, node }));
        configs.set(n.name, file);
        return [[real.images.pause.ref, pause]];
      });
      for (const r of nodes) {
        const n = p.realInfos.find((x) => x.name === r.plan.node);
        if (n) n.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
      }
    },
    async start() {
      if (!nodes.length) return;
      p.step(`real nodes: containerd, images and kubelet on ${p.realWorkers.join(', ')}, then kubeadm join`);
      await startRealNodes(nodes, { clock: p.clock, log: p.log, signal: p.signal });
      await Promise.all(
        p.realInfos.map((n) =>
          runKubeadm(p, n, [kubeadm, 'join', '--config', configs.get(n.name)!], join(kubeadmDir(p, n.name), 'kubeadm.log')),
        ),
      );
    },
  });
}

/** kubeadm's name of the pause image of `version` (the only image a worker needs under kubeadm's name). */
export async function pauseName(kubeadm: string, version: string): Promise<string> {
  const r = await sh(`${shq(kubeadm)} config images list --kubernetes-version ${shq(`v${version}`)} 2>/dev/null | grep /pause:`, {
    timeoutMs: 60_000,
  });
  const ref = r.stdout.trim();
  if (!ref) throw new KrError('LAB_KUBEADM_FAILED', `kubeadm ${version} names no pause image`);
  return ref;
}

/**
 * Writes nodes as real nodes of kubeadm: `prepare` (given the node, its containerd socket and pod-log directory)
 * writes its kubeadm files and returns the image names it needs.
 */
async function writeKubeadmNodes(
  p: LabPlan,
  infos: LabNodeInfo[],
  firstIndex: number,
  prepare: (n: LabNodeInfo, socket: string, podLogs: string) => Promise<[string, string][]>,
): Promise<RealNode[]> {
  const ctx = realContext(p);
  const mountNs: Record<string, string> = {};
  let tags: [string, string][] = [];
  for (const n of infos) {
    const f = realNodePaths({ dir: join(p.paths.nodesDir, n.name), runDir: join(ctx.runDir, n.name) });
    tags = await prepare(n, f.socket, f.podLogs);
    mountNs[n.name] = mountNsFile(p.instance, n.name);
  }
  return writeRealNodes(
    {
      ...ctx,
      apiserverUrl: `https://${p.apiserverHost}:${APISERVER_PORT}`,
      firstIndex,
      kubeadm: { mountNs, tags },
      ...(p.cpImages && infos.some((n) => p.cpKubelets.includes(n))
        ? {
            staticPods: Object.fromEntries(
              infos
                .filter((n) => p.cpKubelets.includes(n))
                .map((n) => [n.name, { manifests: '/etc/kubernetes/manifests', images: Object.values(p.cpImages!) }]),
            ),
          }
        : {}),
    },
    infos,
  );
}
