/** Running simulated kubelets from their config files (the body of dist/lab/kubelet-sim.js). */
import { readFile, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { createLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { RuntimeStore } from './runtime.js';
import { SimApi } from './api.js';
import { ListWatcher } from './list-watch.js';
import { NodeSim } from './node-sim.js';
import type { KubeletSimFile, PodLite } from './types.js';
import { AgentProcesses } from './agent-process.js';
import { firstRenewOffset } from './timing.js';
import { WheelClock } from './wheel.js';

export function lineLogger(name: string): Logger {
  return createLogger(
    (level, msg, fields) => {
      const extra = Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : '';
      process.stdout.write(`${new Date(realClock.now()).toISOString()} ${level} ${name}: ${msg}${extra}\n`);
    },
    process.env.KUBE_RUNBOOK_DEBUG ? 'debug' : 'info',
  );
}

/** How one process runs its share of the nodes: their timers on one clock, their first renewals spread out. */
interface SimShare {
  clock: Clock;
  firstRenewDelayMs?: number;
}

/**
 * Runs the simulated kubelets of `cfgs` side by side in this process until `signal` aborts. Each node keeps its
 * own connections (through its own forwarder when it has one), so cutting one node's network cuts only it.
 */
export async function runKubeletSims(cfgs: KubeletSimFile[], signal: AbortSignal, logOf: (node: string) => Logger): Promise<void> {
  const clock = new WheelClock(realClock);
  await Promise.all(
    cfgs.map(async (cfg, i) => {
      const log = logOf(cfg.name);
      try {
        await runKubeletSim(cfg, signal, log, { clock, firstRenewDelayMs: firstRenewOffset(i, cfgs.length, cfg.leaseDurationMs) });
      } catch (e) {
        // one node's broken state (a runtime file it cannot read) does not stop the others
        log.error(messageOf(e));
      }
    }),
  );
}

async function runKubeletSim(cfg: KubeletSimFile, signal: AbortSignal, log: Logger, share: SimShare): Promise<void> {
  const { clock } = share;
  const kc = new KubeConfig();
  kc.loadFromFile(cfg.kubeconfig);
  // a few connections per node: its lease, status, pod watch and pod updates
  const api = new SimApi(kc, 10_000, 8, cfg.apiSocket);
  const runtime = new RuntimeStore(cfg.runtimeDir, cfg.name);
  await runtime.load();
  const processes = cfg.agent ? await agentProcesses(cfg, kc, api, clock, log) : undefined;
  log.info(`starting; ${runtime.list().length} simulated container(s) already running`);
  let pods: ListWatcher<PodLite> | undefined = undefined;
  const sim = new NodeSim(cfg, {
    api,
    clock,
    log,
    runtime,
    processes,
    random: Math.random,
    firstRenewDelayMs: share.firstRenewDelayMs,
    onRenewed: (at) => void touch(cfg.heartbeatFile, at),
    onRepeatedFailure: () => api.closeConnections(),
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
    clock,
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
async function agentProcesses(cfg: KubeletSimFile, kc: KubeConfig, api: SimApi, clock: Clock, log: Logger): Promise<AgentProcesses> {
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
    clock,
    log,
    netns: cfg.netns,
  });
}
