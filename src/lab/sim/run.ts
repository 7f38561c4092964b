/** Running one simulated kubelet from its config file (the body of dist/lab/kubelet-sim.js). */
import { readFile, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../../core/clock.js';
import { createLogger, type Logger } from '../../core/logger.js';
import { RuntimeStore } from './runtime.js';
import { SimApi } from './api.js';
import { ListWatcher } from './list-watch.js';
import { NodeSim } from './node-sim.js';
import type { KubeletSimFile, PodLite } from './types.js';
import { AgentProcesses } from './agent-process.js';

export function lineLogger(name: string): Logger {
  return createLogger((level, msg, fields) => {
    const extra = Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : '';
    process.stdout.write(`${new Date(realClock.now()).toISOString()} ${level} ${name}: ${msg}${extra}\n`);
  }, process.env.KUBE_RUNBOOK_DEBUG ? 'debug' : 'info');
}

export async function runKubeletSim(cfg: KubeletSimFile, signal: AbortSignal, log: Logger): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(cfg.kubeconfig);
  const api = new SimApi(kc);
  const runtime = new RuntimeStore(cfg.runtimeDir, cfg.name);
  await runtime.load();
  const processes = cfg.agent ? await agentProcesses(cfg, kc, api, log) : undefined;
  log.info(`starting; ${runtime.list().length} simulated container(s) already running`);
  let pods: ListWatcher<PodLite> | undefined = undefined;
  const sim = new NodeSim(cfg, {
    api,
    clock: realClock,
    log,
    runtime,
    processes,
    random: Math.random,
    onRenewed: (at) => void touch(cfg.heartbeatFile, at),
    onReconnect: () => pods?.resync(),
  });
  const fieldSelector = `spec.nodeName=${cfg.name}`;
  pods = new ListWatcher<PodLite>({
    what: 'pods',
    api,
    list: () => api.listPods(fieldSelector),
    path: '/api/v1/pods',
    query: { fieldSelector },
    onSync: (items) => sim.onPods(items),
    onEvent: (type, pod) => sim.onPodEvent(type, pod),
    clock: realClock,
    log,
  });
  await Promise.all([sim.run(signal), pods.run(signal)]);
  await api.close();
  log.info(`stopped; ${runtime.list().length} simulated container(s) left running`);
}

async function touch(file: string, atMs: number): Promise<void> {
  const t = new Date(atMs);
  try {
    await utimes(file, t, t);
  } catch {
    await writeFile(file, '').catch(() => {});
  }
}


/** The runner of the agent image's pods: their processes get this cluster's address and CA. */
async function agentProcesses(cfg: KubeletSimFile, kc: KubeConfig, api: SimApi, log: Logger): Promise<AgentProcesses> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubelet kubeconfig names no cluster');
  const ca = cluster.caData ? Buffer.from(cluster.caData, 'base64').toString() : await readFile(cluster.caFile ?? '', 'utf8');
  return new AgentProcesses({
    image: cfg.agent!.image,
    cli: cfg.agent!.cli,
    dir: join(cfg.runtimeDir, 'processes'),
    server: new URL(cluster.server),
    ca,
    token: (ns, sa, pod) => api.podToken(ns, sa, pod),
    secretKey: (ns, name, key) => api.podSecretKey(ns, name, key),
    clock: realClock,
    log,
  });
}
