import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { start, startAndWait } from './control.js';
import { CONTROL_PLANE_SERVICES, makeComponentCgroups } from '../host/component-cgroup.js';
import { hierarchies } from '../host/node-cgroup.js';
import { sh } from '../host/host.js';
import { instanceRunDir } from '../host/paths.js';
import * as comp from './components.js';
import { httpGet, writeService, type ServiceSpec } from './services.js';
import { kubernetesDir, manifestsDir, writeStaticPods } from './static-pods.js';
import { startRealNodes, writeRealNodes, type RealNode } from './real-nodes.js';
import { realNodePaths } from './real-node-config.js';
import { component, type LabComponent } from './up-component.js';
import type { LabPlan } from './up-plan.js';

/**
 * The control plane as services of this machine: etcd, then the apiservers, of every member (the members of a new
 * cluster wait for each other: all start, then each is waited for), and their controller-manager and scheduler.
 */
export async function controlPlaneServices(p: LabPlan): Promise<LabComponent[]> {
  const { pki, cps, clock, signal } = p;
  const perMember: { etcd: ServiceSpec; apiserver: ServiceSpec; controllers: ServiceSpec[]; ip: string }[] = [];
  const h = await hierarchies();
  for (const m of cps) {
    // each component of a member in a cpu cgroup of its own, as a static pod's container is: starve-cpu can limit it
    const cpuCgroups = await makeComponentCgroups(h, p.names.nodeCgroup(m.name), CONTROL_PLANE_SERVICES);
    const c = { ...p.componentsOf(m), cpuCgroups };
    perMember.push({
      etcd: comp.etcdService(c),
      apiserver: comp.apiserverService(c),
      controllers: [comp.controllerManagerService(c), comp.schedulerService(c)],
      ip: m.ip,
    });
  }
  const ha = cps.length > 1;
  const each = (pick: (s: (typeof perMember)[number]) => ServiceSpec, what: string, waitMs: number): LabComponent =>
    component({
      name: what,
      write: async () => {
        for (const s of perMember) await writeService(pick(s));
      },
      start: async () => {
        p.step(ha ? `${what} (${what === 'etcd' ? `${cps.length} members` : cps.length})` : what);
        for (const s of perMember) await start(pick(s).dir);
      },
      ready: async () => {
        for (const s of perMember) await startAndWait(pick(s).dir, waitMs, clock, signal);
      },
    });
  const controllers = component({
    name: 'kube-controller-manager and kube-scheduler',
    write: async () => {
      for (const s of perMember) {
        for (const x of s.controllers) await writeService(x);
        // as on kubeadm, a member's controller-manager and scheduler talk to their own apiserver, not through the VIP
        const local = `https://${s.ip}:${comp.APISERVER_PORT}`;
        for (const [who, x] of [
          ['controller-manager', s.controllers[0]!],
          ['scheduler', s.controllers[1]!],
        ] as const)
          await p.kubeconfig(who, { certFile: pki.cert(who), keyFile: pki.key(who) }, join(x.dir, 'kubeconfig'), local);
      }
    },
    start: async () => {
      p.step('kube-controller-manager and kube-scheduler');
      for (const s of perMember) for (const x of s.controllers) await start(x.dir);
    },
  });
  return [each((s) => s.etcd, 'etcd', 30_000), each((s) => s.apiserver, 'kube-apiserver', 120_000), controllers];
}

/**
 * `--static-pods`: cp-1 is a real node whose kubelet runs the control plane from kubeadm's manifests in its
 * /etc/kubernetes, etcd and kube-apiserver first, kube-controller-manager and kube-scheduler once they answer.
 */
export function staticControlPlane(p: LabPlan): LabComponent {
  const { pki, staticCp, real, cpImages, clock, log, signal } = p;
  if (!staticCp || !cpImages || !real) throw new Error('a static-pod control plane needs cp-1 as a real node and its images');
  let controllers: (() => Promise<string>) | undefined;
  let nodes: RealNode[] = [];
  return component({
    name: `${staticCp.name}'s static pods`,
    async write() {
      for (const m of p.cps) {
        const c = p.componentsOf(m);
        const root = join(p.paths.nodesDir, m.name);
        // kubeadm's /etc/kubernetes of the member: its manifests and the components' kubeconfigs
        const k8s = kubernetesDir(root);
        await writeStaticPods(c, cpImages, root, ['etcd', 'kube-apiserver']);
        controllers = () => writeStaticPods(c, cpImages, root, ['kube-controller-manager', 'kube-scheduler']);
        const own = `https://${m.ip}:${comp.APISERVER_PORT}`;
        for (const who of ['admin', 'controller-manager', 'scheduler'] as const)
          await p.kubeconfig(who, { certFile: pki.cert(who), keyFile: pki.key(who) }, join(k8s, `${who}.conf`), own);
      }
      const manifests = manifestsDir(join(p.paths.nodesDir, staticCp.name));
      // its kubelet talks to its own apiserver, as kubeadm's kubelet.conf of a control-plane node does
      const cpServer = `https://${staticCp.ip}:${comp.APISERVER_PORT}`;
      nodes = await writeRealNodes(
        {
          ...realContext(p),
          apiserverUrl: cpServer,
          firstIndex: 200,
          staticPods: { [staticCp.name]: { manifests, images: Object.values(cpImages) } },
        },
        [staticCp],
      );
      // its containerd holds the control plane's containers: `lab containers` and `lab status` read them there
      for (const r of nodes) staticCp.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
    },
    async start() {
      p.step(`${staticCp.name}: containerd, images and the kubelet, which starts etcd and kube-apiserver from their manifests`);
      await startRealNodes(nodes, { clock, log, signal });
    },
    async ready() {
      await waitStaticControlPlane(staticCp.ip, pki.caCert, clock, signal);
      p.step(`${staticCp.name}: kube-controller-manager and kube-scheduler manifests`);
      await controllers?.();
    },
  });
}

/** What real nodes are written from. */
export function realContext(p: LabPlan) {
  return {
    instance: p.instance,
    names: p.names,
    serviceDir: p.paths.serviceDir,
    runDir: instanceRunDir(p.instance),
    pki: p.pki,
    settings: p.settings,
    apiserverUrl: p.info.apiserverUrl,
    bin: p.real!,
  };
}

/** Until the static pods' etcd and apiserver answer (the kubelet starts them; images are local), at most 120 s. */
export async function waitStaticControlPlane(ip: string, caFile: string, clock: Clock, signal?: AbortSignal): Promise<void> {
  const deadline = clock.now() + 120_000;
  const check = `${httpGet(`https://${ip}:${comp.APISERVER_PORT}/readyz`, { caFile })} | grep -qx ok`;
  for (;;) {
    if ((await sh(check)).code === 0) return;
    if (clock.now() > deadline) throw new KrError('LAB_START_FAILED', `the static pods' kube-apiserver on ${ip} was not ready within 120s`);
    await clock.sleep(500, signal);
  }
}
