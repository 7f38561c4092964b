import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { defaultAgentImage } from 'kube-runbook/internal/inventory/schema.js';
import { eachLimited } from 'kube-runbook/internal/core/each-limited.js';
import { start } from './control.js';
import * as comp from './components.js';
import { productCli } from '../host/product.js';
import { writeService } from './services.js';
import { podCidrOf } from '../sim/objects.js';
import type { KubeletSimFile } from '../sim/types.js';
import { createWorkload, waitReady, waitServiceAccount } from './workload.js';
import { startRealNodes, writeRealNodes, type RealNode } from './real-nodes.js';
import { realNodePaths } from './real-node-config.js';
import { WORKLOAD_IMAGE } from '../install/images.js';
import { component, type LabComponent } from './up-component.js';
import { realContext } from './up-control-plane.js';
import type { LabPlan } from './up-plan.js';
import { simulatedWorker } from '../host/info.js';

/**
 * How many simulated nodes share a process: a group shares the runtime and the timers (a process per node cost far
 * more memory and start time: BENCHMARKS.md, the lab benchmarks), and a few groups still use both cores of a small machine.
 */
const NODES_PER_SIM_PROCESS = 64;

/** The simulated nodes: a forwarder per node (its kubeconfig and config.json), a process per group of nodes. */
export function simulatedNodes(p: LabPlan): LabComponent {
  const { paths, pki, settings, bin } = p;
  const ctx0 = p.componentsOf(p.cp);
  let groups: string[] = [];
  return component({
    name: 'kubelet simulators',
    async write() {
      // hundreds of nodes: their files written side by side
      const sims = p.info.nodes.filter(simulatedWorker);
      await eachLimited([...sims.entries()], 16, async ([i, n]) => {
        const svc = comp.kubeletService(ctx0, n.name, n.netns, { host: p.apiserverHost, port: comp.APISERVER_PORT });
        await writeService(svc);
        await p.kubeconfig(n.name, { token: pki.tokens[`system:node:${n.name}`]! }, join(svc.dir, 'kubeconfig'));
        const cfg: KubeletSimFile = {
          name: n.name,
          zone: n.zone,
          region: 'lab',
          ip: n.ip,
          podCidr: podCidrOf(i + 1),
          leaseDurationMs: settings.leaseDuration,
          statusReportFrequencyMs: settings.nodeStatusReportFrequency,
          statusCheckMs: Math.min(settings.leaseRenewInterval, 10_000),
          kubeletVersion: `v${bin.version}`,
          kubeconfig: join(svc.dir, 'kubeconfig'),
          runtimeDir: paths.runtimeDir(n.name),
          heartbeatFile: join(svc.dir, 'heartbeat'),
          apiSocket: comp.apiSocketOf(svc.dir),
          netns: n.netns,
          // pods of the node agent's image run `kube-runbook agent` for real, as this CLI
          agent: { image: defaultAgentImage(), cli: [process.execPath, productCli()] },
        };
        await writeFile(join(svc.dir, 'config.json'), `${JSON.stringify(cfg, null, 2)}\n`);
      });
      groups = await writeSimGroups(ctx0, paths.stateDir, p.workers, p.simScript);
    },
    async start() {
      p.step('kubelet simulators');
      // the nodes' forwarders (a few ms each), then the processes that simulate them, a group of nodes each
      await eachLimited(p.workers, 16, (n) => start(paths.serviceDir(n, 'kubelet')));
      for (const dir of groups) await start(dir);
    },
  });
}

/** The `kubelet-sims` services that run the simulated nodes, `<state>/kubelet-sims/group-N/`: their directories. */
async function writeSimGroups(c: comp.ComponentContext, stateDir: string, workers: string[], simScript: string): Promise<string[]> {
  const dirs: string[] = [];
  for (let g = 0; g * NODES_PER_SIM_PROCESS < workers.length; g++) {
    const group = `group-${g + 1}`;
    const svc = comp.kubeletSimsService(c, join(stateDir, 'kubelet-sims', group), group, process.execPath, simScript);
    await writeService(svc);
    const members = workers.slice(g * NODES_PER_SIM_PROCESS, (g + 1) * NODES_PER_SIM_PROCESS);
    const configs = members.map((n) => join(c.serviceDir(n, 'kubelet'), 'config.json'));
    await writeFile(join(svc.dir, 'group.json'), `${JSON.stringify(configs, null, 2)}\n`);
    dirs.push(svc.dir);
  }
  return dirs;
}

/** The real workers (`--real-nodes`): containerd, the images and a real kubelet each. */
export function realNodes(p: LabPlan): LabComponent {
  const real = p.real!;
  let nodes: RealNode[] = [];
  return component({
    name: 'real nodes',
    async write() {
      nodes = await writeRealNodes(realContext(p), p.realInfos);
      for (const r of nodes) {
        const n = p.realInfos.find((x) => x.name === r.plan.node);
        if (n) n.runtime = { ctr: real.containerd.ctr, socket: realNodePaths(r.plan).socket };
      }
    },
    async start() {
      if (!nodes.length) return;
      p.step(`real nodes: containerd, images and kubelet on ${p.realWorkers.join(', ')}`);
      await startRealNodes(nodes, { clock: p.clock, log: p.log, signal: p.signal });
    },
  });
}

/** The sample workload, and every node Ready with every pod of it running (kubeadm's labels on a static-pod cp-1). */
export function workload(p: LabPlan): LabComponent {
  const { settings, cpKubelets, clock, signal } = p;
  const admin = new KubeConfig();
  const cps = cpKubelets.map((n) => n.name);
  const kubelets = [...cps, ...p.workers, ...p.realWorkers, ...p.systemdInfos.map((n) => n.name)];
  return component({
    name: 'workload',
    async start() {
      admin.loadFromFile(p.paths.kubeconfig);
      if (!settings.workload) return;
      p.step(`sample workload (${settings.replicas} replicas in namespace demo)`);
      const image = p.realWorkers.length ? WORKLOAD_IMAGE : undefined;
      await createWorkload(admin, settings.replicas, clock, signal, image, cps);
    },
    async ready() {
      p.step(`waiting for ${kubelets.length - cps.length} node(s) Ready and every pod running`);
      await waitServiceAccount(admin, 'default', clock, signal);
      await waitReady(admin, {
        nodes: kubelets,
        pods: settings.workload ? settings.replicas : 0,
        timeoutMs: p.readyTimeoutMs ?? 120_000,
        clock,
        signal,
      });
      for (const cp of cps) {
        p.step(`${cp}: kubeadm's control-plane labels`);
        await markControlPlane(admin, cp);
      }
    },
  });
}

/**
 * What `kubeadm init phase mark-control-plane` does besides the taint (which the kubelet registered with): the
 * control-plane role label and the exclusion from external load balancers. A kubelet may not set
 * `node-role.kubernetes.io/*` labels on its own Node, so the admin does.
 */
async function markControlPlane(admin: KubeConfig, node: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  await core.patchNode(
    {
      name: node,
      body: {
        metadata: {
          labels: { 'node-role.kubernetes.io/control-plane': '', 'node.kubernetes.io/exclude-from-external-load-balancers': '' },
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}
