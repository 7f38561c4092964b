import { mkdir, readFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { EXIT, KrError, messageOf, quote } from 'kube-runbook/internal/core/errors.js';
import { readLabInfo, type LabInfo } from '../host/info.js';
import { readTokens } from '../host/pki.js';
import { RuntimeStore, runtimeDirOf } from './runtime.js';
import { zoneOf } from '../host/settings.js';
import { SimApi } from './api.js';
import { ListWatcher } from './list-watch.js';
import { NodeSim } from './node-sim.js';
import { podCidrOf } from './objects.js';
import type { NodeLite, PodLite } from './types.js';
import { firstRenewOffset } from './timing.js';

/** Label of every fleet node (value: the lab instance). */
export const FLEET_LABEL = 'lab.kube-runbook.dev/fleet';
const MAX_FLEET = 16_000;

export interface FleetOptions {
  instance?: string;
  count: number;
  zones?: number;
  /** Lease renew interval (default 10s, the kubelet's); the lease duration is four times it. */
  leaseRenewMs?: number;
  statusFrequencyMs?: number;
  log?: Logger;
  clock?: Clock;
  /** Called every `progressMs` (default 10s) with the fleet's state. */
  onProgress?: (s: FleetStats) => void;
  progressMs?: number;
  /** Delete the fleet's Nodes when it stops (default true). */
  cleanup?: boolean;
}

export interface FleetStats {
  count: number;
  /** Simulated nodes that registered. */
  registered: number;
  /** Simulated nodes whose last renewal is within one lease duration. */
  renewing: number;
  /** Fleet nodes Ready=True as the apiserver has them (from a node watch). */
  ready: number;
  /** Ready→not-Ready transitions seen since all nodes were first Ready. */
  flaps: number;
  renewals: number;
  /** Since every node was first Ready (steady state): renewals per second, and the longest gap between two renewals of a node. */
  steadyRenewalsPerSecond?: number;
  maxRenewGapMs?: number;
  /** Time from the start until every node was Ready. */
  allReadyAfterMs?: number;
  elapsedMs: number;
  /** CPU seconds this process used since the fleet started, and its resident memory (MiB). */
  cpuSeconds: number;
  rssMiB: number;
}

function fleetNodeName(i: number): string {
  return `fleet-${String(i).padStart(5, '0')}`;
}

/**
 * Many simulated kubelets in one process (no namespaces), for scale work: each renews its Lease and keeps its
 * NodeStatus as a kubelet does; one node watch and one pod watch are shared by the whole fleet.
 */
export async function runFleet(o: FleetOptions, signal: AbortSignal): Promise<FleetStats> {
  if (!Number.isInteger(o.count) || o.count < 1 || o.count > MAX_FLEET)
    throw new KrError('LAB_BAD_OPTION', `--count must be a whole number from 1 to ${MAX_FLEET} (got ${quote(o.count)})`, {
      exit: EXIT.invalid,
    });
  const info = await readLabInfo(o.instance ?? 'lab');
  const fleet = new Fleet(o, info, new SimApi(await fleetKubeConfig(info)));
  await fleet.createNodes();
  return fleet.run(signal);
}

/** The fleet's simulated nodes, the Nodes as the apiserver has them, and what its progress reports. */
class Fleet {
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly renewMs: number;
  private readonly leaseDurationMs: number;
  /** The fleet's Nodes as the node watch has them. */
  private readonly nodes = new Map<string, NodeLite>();
  private readonly sims = new Map<string, NodeSim>();
  private readonly everReady = new Set<string>();
  private flaps = 0;
  private allReadyOnce = false;
  private steady: { at: number; renewals: number } | undefined;
  private readonly started: number;
  private readonly cpu0 = process.cpuUsage();

  constructor(
    private readonly o: FleetOptions,
    private readonly info: LabInfo,
    private readonly api: SimApi,
  ) {
    this.clock = o.clock ?? realClock;
    this.log = o.log ?? silentLogger;
    this.renewMs = o.leaseRenewMs ?? 10_000;
    this.leaseDurationMs = this.renewMs * 4;
    this.started = this.clock.now();
  }

  /** A simulated kubelet per node, each with its runtime's state loaded from its directory. */
  async createNodes(): Promise<void> {
    const { o, info } = this;
    // per-node chatter (registrations) would drown the fleet's progress; warnings still show
    const log = this.log;
    const quiet: Logger = { debug: () => {}, info: () => {}, warn: (m, f) => log.warn(m, f), error: (m, f) => log.error(m, f) };
    const stateDirs = Array.from({ length: o.count }, (_, i) => runtimeDirOf(info.stateDir, fleetNodeName(i + 1)));
    for (const d of stateDirs) await mkdir(d, { recursive: true });
    for (let i = 1; i <= o.count; i++) {
      const name = fleetNodeName(i);
      const runtime = new RuntimeStore(stateDirs[i - 1]!, name);
      await runtime.load();
      const sim = new NodeSim(
        {
          name,
          zone: zoneOf(i, o.zones ?? 1),
          region: 'lab',
          ip: `198.${18 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
          podCidr: podCidrOf(256 + i),
          leaseDurationMs: this.leaseDurationMs,
          statusReportFrequencyMs: o.statusFrequencyMs ?? 60_000,
          statusCheckMs: this.renewMs,
          kubeletVersion: `v${info.binaries?.version ?? '0.0.0'}`,
          labels: { [FLEET_LABEL]: info.instance },
        },
        {
          api: this.api,
          clock: this.clock,
          log: quiet,
          runtime,
          random: Math.random,
          cachedNode: () => this.nodes.get(name),
          firstRenewDelayMs: firstRenewOffset(i - 1, o.count, this.leaseDurationMs),
        },
      );
      this.sims.set(name, sim);
    }
  }

  /** Runs the watches, the kubelets and the progress reports until `signal`; then the last stats, the Nodes deleted. */
  async run(signal: AbortSignal): Promise<FleetStats> {
    const { o, log, api } = this;
    log.info(`fleet: ${o.count} simulated node(s) against lab ${this.info.instance}, lease renew ${this.renewMs} ms`);
    await Promise.all([
      this.nodeWatch().run(signal),
      this.podWatch().run(signal),
      this.progress(signal),
      ...[...this.sims.values()].map((s) => s.run(signal)),
    ]);
    const final = this.stats();
    if (o.cleanup ?? true) await deleteFleet(api, this.info.instance, log);
    await api.close();
    return final;
  }

  private onNode(type: string, n: NodeLite): void {
    const name = n.metadata.name;
    if (type === 'DELETED') return void this.nodes.delete(name);
    const wasReady = isReady(this.nodes.get(name));
    this.nodes.set(name, n);
    if (isReady(n)) this.everReady.add(name);
    else if (wasReady && this.allReadyOnce) this.flaps++;
  }

  private nodeWatch(): ListWatcher<NodeLite> {
    const { api, info } = this;
    return new ListWatcher<NodeLite>({
      what: 'fleet nodes',
      api,
      list: () => api.listNodes(`${FLEET_LABEL}=${info.instance}`),
      path: '/api/v1/nodes',
      query: { labelSelector: `${FLEET_LABEL}=${info.instance}` },
      onSync: (items) => {
        this.nodes.clear();
        for (const n of items) this.onNode('ADDED', n);
      },
      onEvent: (type, n) => this.onNode(type, n),
      clock: this.clock,
      log: this.log,
    });
  }

  /** The pods bound to the fleet's nodes, handed to their kubelets. */
  private podWatch(): ListWatcher<PodLite> {
    const { api, sims } = this;
    const byNode = (pods: PodLite[]) => {
      const m = new Map<string, PodLite[]>();
      for (const p of pods) {
        const node = p.spec?.nodeName;
        if (!node || !sims.has(node)) continue;
        const list = m.get(node);
        if (list) list.push(p);
        else m.set(node, [p]);
      }
      return m;
    };
    return new ListWatcher<PodLite>({
      what: 'fleet pods',
      api,
      list: () => api.listPods('spec.nodeName!='),
      path: '/api/v1/pods',
      query: { fieldSelector: 'spec.nodeName!=' },
      onSync: async (items) => {
        const m = byNode(items);
        await Promise.all([...sims].map(([name, sim]) => sim.onPods(m.get(name) ?? [])));
      },
      onEvent: (type, pod) => sims.get(pod.spec?.nodeName ?? '')?.onPodEvent(type, pod),
      clock: this.clock,
      log: this.log,
    });
  }

  private async progress(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.clock.sleep(this.o.progressMs ?? 10_000, signal).catch(() => {});
      if (!signal.aborted) this.o.onProgress?.(this.stats());
    }
  }

  /** The fleet's state now; the first time every node is Ready starts the steady state. */
  private stats(): FleetStats {
    const { o, started } = this;
    const now = this.clock.now();
    const list = [...this.sims.values()];
    let ready = 0;
    for (const n of this.nodes.values()) if (isReady(n)) ready++;
    const renewals = list.reduce((a, s) => a + s.renewals, 0);
    if (!this.allReadyOnce && ready === o.count) {
      this.allReadyOnce = true;
      this.steady = { at: now, renewals };
      for (const s of list) s.maxRenewGapMs = 0;
    }
    const steady = this.steady;
    const window = steady ? (now - steady.at) / 1000 : 0;
    return {
      count: o.count,
      registered: this.nodes.size,
      renewing: list.filter((s) => s.lastRenewAt !== undefined && now - s.lastRenewAt <= this.leaseDurationMs).length,
      ready,
      flaps: this.flaps,
      renewals,
      ...(steady && window > 0
        ? {
            allReadyAfterMs: steady.at - started,
            steadyRenewalsPerSecond: Math.round(((renewals - steady.renewals) / window) * 10) / 10,
            maxRenewGapMs: Math.max(...list.map((s) => s.maxRenewGapMs)),
          }
        : {}),
      elapsedMs: now - started,
      cpuSeconds: Math.round(Object.values(process.cpuUsage(this.cpu0)).reduce((a, b) => a + b, 0) / 10_000) / 100,
      rssMiB: Math.round(process.memoryUsage().rss / 1_048_576),
    };
  }
}

function isReady(n: NodeLite | undefined): boolean {
  return n?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
}

/** Deletes the fleet's Nodes (their Leases go with them: they are owned by the Node). */
async function deleteFleet(api: SimApi, instance: string, log: Logger): Promise<void> {
  try {
    await api.core.deleteCollectionNode({ labelSelector: `${FLEET_LABEL}=${instance}` }, api.opts(undefined, 60_000));
  } catch (e) {
    log.warn(`deleting the fleet's nodes: ${messageOf(e)}`);
  }
}

/** A client of the lab's fleet identity (a static token of tokens.csv). */
async function fleetKubeConfig(info: LabInfo): Promise<KubeConfig> {
  const tokens = await readTokens(`${info.stateDir}/pki`);
  const token = tokens['kube-runbook-fleet'];
  if (!token) throw new KrError('LAB_STATE_BROKEN', `no fleet token in ${info.stateDir}/pki/tokens.csv`);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: info.context,
        server: info.apiserverUrl,
        caData: (await readFile(`${info.stateDir}/pki/ca.crt`)).toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [{ name: 'fleet', token }],
    contexts: [{ name: info.context, cluster: info.context, user: 'fleet' }],
    currentContext: info.context,
  });
  return kc;
}
