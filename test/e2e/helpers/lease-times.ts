import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../../../src/core/clock.js';
import type { LabInfo } from '../../../packages/lab/src/index.js';
import { controllerManagerLog } from '../../../packages/lab/src/lifecycle/controller-log.js';
import { coreApi } from './lab.js';

/**
 * What the cluster itself says about a remediation's undo, apart from the executor: every node Lease's renewTime as the
 * apiserver stores it (read by this test's own client every 250 ms, so a renewal is seen whenever it is stored, also
 * when the list failed meanwhile, e.g. while the apiserver was down), and the moment the controller-manager says its
 * taint eviction started again (its own log line). Together they show whether evictions came back only once every
 * node heartbeated again.
 */
export class LeaseTimes {
  private readonly renewals = new Map<string, Set<number>>();
  private readonly reads: Polling;

  constructor(lab: LabInfo) {
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const api = kc.makeApiClient(CoordinationV1Api);
    // the apiserver away (the outage rehearsed): renewals stored meanwhile are read once it answers
    this.reads = polling(250, async () => {
      for (const l of (await api.listNamespacedLease({ namespace: 'kube-node-lease', timeoutSeconds: 2 })).items) {
        const name = l.metadata?.name;
        if (!name || !l.spec?.renewTime) continue;
        const seen = this.renewals.get(name) ?? new Set<number>();
        seen.add(new Date(l.spec.renewTime).getTime());
        this.renewals.set(name, seen);
      }
    });
  }

  stop(): Promise<void> {
    return this.reads.stop();
  }

  /** `node`'s longest wait (ms) between two renewals the apiserver stored from `from` - `lookBackMs` to `to`; 0 with fewer than two. */
  longestGap(node: string, from: number, to: number, lookBackMs: number): number {
    const times = [...(this.renewals.get(node) ?? [])].filter((t) => t >= from - lookBackMs && t <= to).sort((a, b) => a - b);
    return Math.max(0, ...times.slice(1).map((t, i) => t - times[i]!));
  }

  /** `node`'s last renewal at or before `at` (ms), if any was seen. */
  lastRenewalBy(node: string, at: number): number | undefined {
    const times = [...(this.renewals.get(node) ?? [])].filter((t) => t <= at);
    return times.length ? Math.max(...times) : undefined;
  }
}

/**
 * When the controller-manager started evicting for NoExecute taints again, from its own log: the first start line at
 * or after `afterMs` (the freeze's apply) of the controller that evicts on this release: the taint-eviction
 * controller (1.29+, after `disable-taint-eviction` is undone; the node lifecycle controller also starts at each
 * restart while the freeze holds, and evicts nothing then), else the node lifecycle controller, which evicts by itself
 * before 1.29 (after `stop-controller-manager` is undone). Read until it appears, at most `timeoutMs`: the
 * controller-manager starts its controllers only once it leads, which may be after the run has ended.
 */
export async function evictionsBackAt(
  lab: LabInfo,
  o: { afterMs: number; minor: number; timeoutMs?: number },
): Promise<number | undefined> {
  const starts =
    o.minor >= 29
      ? // 1.34 names its logger before the controller: "Starting" logger="taint-eviction-controller" controller="..."
        (m: string) => /^"Starting"(?: logger="[^"]*")? controller="taint-eviction-controller"/.test(m)
      : (m: string) => /^Starting (node controller|NoExecuteTaintManager)/.test(m) || /^"Starting node controller"/.test(m);
  const until = realClock.now() + (o.timeoutMs ?? 60_000);
  for (;;) {
    const back = (await controllerManagerLog(lab, 'cp-1', o.afterMs)).find(
      ({ at, line }) => line.severity === 'I' && starts(line.message) && at >= o.afterMs,
    );
    if (back) return back.at;
    if (realClock.now() > until) return undefined;
    await realClock.sleep(500);
  }
}

/**
 * When the controller-manager lost its leadership between `from` and `to` (ms), from its own log: a renewal of its
 * leader Lease that did not go through in time ("failed to renew lease", on 1.20 to 1.37 alike), or a leadership
 * acquired afresh ("successfully acquired lease") up to one leader Lease duration (15 s) after `to`: the lab's
 * controller-manager leads from its start, so a new acquisition means the leader before it was gone, e.g. killed by
 * its kubelet once its /healthz failed on a late renewal (kubeadm's static pod has a liveness probe), before it could
 * log the failed renewal.
 */
export async function leadershipLost(lab: LabInfo, from: number, to: number): Promise<number[]> {
  const lost: number[] = [];
  let logged = false; // the loss before this acquisition was logged as a failed renewal
  for (const { at, line } of await controllerManagerLog(lab, 'cp-1', from)) {
    if (/failed to renew lease/.test(line.message) && at >= from && at <= to) {
      lost.push(at);
      logged = true;
    } else if (/successfully acquired lease/.test(line.message) && at > from && at <= to + LEADER_LEASE_MS) {
      if (!logged) lost.push(at);
      logged = false;
    }
  }
  return lost;
}

/** The controller-manager's leader Lease duration: its default, which neither the lab nor kubeadm changes. */
const LEADER_LEASE_MS = 15_000;

/**
 * What the controller-manager's own log says of node health and of its leadership between `from` and `to` (ms): how
 * many times it found a node's status stale ("Node hasn't been updated", at --v=2) and failed to write it, and its
 * leadership lines, each with its time. For the record of an unguarded run; nothing is asserted on it.
 */
export async function controllerSaid(lab: LabInfo, from: number, to: number): Promise<string> {
  const lines = (await controllerManagerLog(lab, 'cp-1', from)).filter(({ at }) => at >= from && at <= to);
  const count = (re: RegExp) => lines.filter(({ line }) => re.test(line.message)).length;
  const leadership = lines
    .filter(({ line }) => /renew lease|acquired lease|leaderelection lost/i.test(line.message))
    .map(({ at, line }) => `${new Date(at).toISOString()} ${line.message.slice(0, 120)}`);
  return `stale node status found ${count(/hasn't been updated/)} time(s), node writes failed ${count(/error updating node/i)} time(s), started ${count(/^FLAG: --v=/)} time(s); leadership: ${leadership.join('; ') || 'no line'}`;
}

/**
 * Each node's Ready condition as the apiserver stores it (written by the kubelet, or by the node lifecycle controller
 * when it marks a silent node Unknown), read by this test's own client every 500 ms: the times each node was seen not
 * Ready, with the condition's own lastTransitionTime. Apart from the executor's observers.
 */
export class NotReadyTimes {
  /** node -> the moments its Ready condition left True -> how it stood then */
  private readonly seen = new Map<string, Map<number, string>>();
  private readonly reads: Polling;

  constructor(lab: LabInfo) {
    const api = coreApi(lab);
    // the apiserver slow or away: what it stored meanwhile is read once it answers
    this.reads = polling(500, async () => {
      for (const n of (await api.listNode({ timeoutSeconds: 2 })).items) {
        const ready = n.status?.conditions?.find((c) => c.type === 'Ready');
        const name = n.metadata?.name;
        if (!name || !ready || ready.status === 'True') continue;
        const since = ready.lastTransitionTime ? new Date(ready.lastTransitionTime).getTime() : realClock.now();
        const times = this.seen.get(name) ?? new Map<number, string>();
        if (!times.has(since)) times.set(since, `${ready.status} (${ready.reason ?? 'no reason'})`);
        this.seen.set(name, times);
      }
    });
  }

  stop(): Promise<void> {
    return this.reads.stop();
  }

  /** The nodes seen not Ready, each with the moment its Ready condition left True, between `from` and `to` (ms). */
  between(from: number, to: number): { node: string; at: string; reason: string }[] {
    return [...this.seen].flatMap(([node, times]) =>
      [...times]
        .filter(([since]) => since >= from && since <= to)
        .map(([since, reason]) => ({ node, at: new Date(since).toISOString(), reason })),
    );
  }
}

interface Polling {
  stop(): Promise<void>;
}

/** Runs `read` every `everyMs` until stopped; a read that fails is tried again at the next turn. */
function polling(everyMs: number, read: () => Promise<void>): Polling {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await read().catch(() => undefined);
      await realClock.sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
