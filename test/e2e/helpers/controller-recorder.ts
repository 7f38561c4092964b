import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { realClock } from '../../../src/core/clock.js';
import type { Ctx } from '../../../src/contract/context.js';
import { type SlimLease, type SlimNode, type SlimPod, watchSpecs, zoneOf } from '../../../src/kube/resources.js';
import { tolerationMs, UNREACHABLE } from '../../../src/kube/tolerations.js';
import type { LifecycleSettings } from '../../../src/kube/versions.js';
import type { ControllerTrace, TraceNode } from '../../../src/testing/controller-trace.js';
import { parseControllerLog } from '../../../src/testing/controller-log.js';
import type { LabInfo } from '../../../packages/lab/src/index.js';
import { REPO } from './lab.js';

/*
 * Records what the lab's real kube-controller-manager decides while kubelets stop: from watches of the Nodes (the
 * Ready condition's move to Unknown, every NoExecute unreachable taint's timeAdded and its removal), the node Leases
 * (each stopped kubelet's last renewal) and the pods (their nodes and tolerations, their deletion), and from the
 * controller's log at the lab's --v=2 (queue additions, zone states, the taint manager's deletions, failed taint
 * writes: the same lines on 1.20, 1.34 and 1.37, worded differently). `trace()` makes a ControllerTrace of it (src/testing/controller-trace.ts).
 */

const run = promisify(execFile);
const EXCLUDED = 'node.kubernetes.io/exclude-disruption';
const unreachableOf = (n: SlimNode) => n.taints.find((t) => t.key === UNREACHABLE && t.effect === 'NoExecute');

export class ControllerRecorder {
  private readonly nodes = new Map<string, { zone: string; excluded: boolean }>();
  private readonly renewed = new Map<string, number>();
  private readonly stopped = new Map<string, number>();
  private readonly pods = new Map<string, { node: string; tolerationMs: number | null }>();
  private readonly deleted = new Map<string, number>();
  private readonly lastTaint = new Map<string, number | undefined>();
  readonly observed: ControllerTrace['observed'] = { notReady: [], queued: [], taints: [], untainted: [], evictions: [], zoneStates: [] };

  constructor(
    ctx: Ctx,
    private readonly lab: LabInfo,
  ) {
    const hub = ctx.kube.watches!;
    hub.watch(watchSpecs.nodes()).subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified') return;
      const n: SlimNode = c.object;
      const now = realClock.now();
      this.nodes.set(n.name, { zone: zoneOf(n.labels), excluded: n.labels[EXCLUDED] !== undefined });
      if (n.ready?.status === 'Unknown' && !this.observed.notReady.some((x) => x.node === n.name))
        this.observed.notReady.push({ node: n.name, transition: n.ready.transition ?? now, seenAt: now });
      const taint = unreachableOf(n);
      const before = this.lastTaint.get(n.name);
      if (taint && taint.timeAdded !== before) this.observed.taints.push({ node: n.name, timeAdded: taint.timeAdded ?? now, seenAt: now });
      if (!taint && before !== undefined) this.observed.untainted.push({ node: n.name, seenAt: now });
      this.lastTaint.set(n.name, taint ? (taint.timeAdded ?? now) : undefined);
    });
    hub.watch(watchSpecs.nodeLeases()).subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified') return;
      const l: SlimLease = c.object;
      if (l.renewTime !== undefined) this.renewed.set(l.name, l.renewTime);
    });
    hub.watch(watchSpecs.pods()).subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified') return;
      const p: SlimPod = c.object;
      const key = `${p.namespace}/${p.name}`;
      if (!p.nodeName) return;
      const ms = tolerationMs(p.tolerations, [{ key: UNREACHABLE, effect: 'NoExecute' }]);
      if (!this.pods.has(key)) this.pods.set(key, { node: p.nodeName, tolerationMs: Number.isFinite(ms) ? ms : null });
      if (p.deletionTimestamp !== undefined && !this.deleted.has(key)) this.deleted.set(key, realClock.now());
    });
  }

  /** Stops the kubelets of `names` one after another, `gapMs` apart. */
  async stop(names: readonly string[], gapMs = 0): Promise<void> {
    for (const name of names) {
      await run('sh', [join(this.lab.stateDir, 'nodes', name, 'kubelet', 'stop')]);
      this.stopped.set(name, realClock.now());
      if (gapMs > 0) await realClock.sleep(gapMs);
    }
  }

  has = {
    tainted: (node: string) => this.observed.taints.some((t) => t.node === node),
    evicted: (node: string) => [...this.deleted.keys()].some((k) => this.pods.get(k)?.node === node),
  };

  /** The trace from `start` to now: the controller's log read now. */
  async trace(o: { release: string; scenario: string; settings: LifecycleSettings; start: number }): Promise<ControllerTrace> {
    const end = realClock.now();
    const log = parseControllerLog(
      await readFile(join(this.lab.stateDir, 'nodes', 'cp-1', 'kube-controller-manager', 'log'), 'utf8').catch(() => ''),
      new Date(o.start).getUTCFullYear(),
    ).filter((l) => l.at >= o.start && l.at <= end);
    const deletedAt = new Map(log.filter((l) => l.pod).map((l) => [l.pod!, l.at]));
    const nodes: TraceNode[] = [...this.nodes]
      .map(([name, n]) => ({
        name,
        zone: n.zone,
        ...(n.excluded ? { excluded: true } : {}),
        ...(this.stopped.has(name) ? { lastRenew: this.renewed.get(name), stoppedAt: this.stopped.get(name) } : {}),
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
    return {
      kind: 'kube-runbook/controller-trace',
      release: o.release,
      scenario: o.scenario,
      settings: o.settings,
      start: o.start,
      end,
      nodes,
      pods: [...this.pods].map(([key, p]) => ({ key, ...p })).sort((a, b) => a.key.localeCompare(b.key)),
      observed: {
        ...this.observed,
        queued: log.filter((l) => l.queued).map((l) => ({ node: l.queued!, at: l.at })),
        evictions: [...this.deleted]
          .filter(([key]) => deletedAt.has(key))
          .map(([pod, seenAt]) => ({ pod, at: deletedAt.get(pod)!, seenAt }))
          .sort((a, b) => a.at - b.at),
        zoneStates: log.filter((l) => l.zone).map((l) => ({ ...l.zone!, at: l.at })),
        taintFailures: log.filter((l) => l.taintFailed).map((l) => ({ node: l.taintFailed!, at: l.at })),
      },
    };
  }
}

/** Where a trace is kept: src/forecast/fixtures/real-controller-<release>-<scenario>.json (release as `1.37`). */
const traceFixture = (release: string, scenario: string): string =>
  join(REPO, 'src', 'forecast', 'fixtures', `real-controller-${/(\d+\.\d+)/.exec(release)?.[1] ?? release}-${scenario}.json`);

/** Writes the trace as a fixture when KUBE_RUNBOOK_RECORD_TRACES=1 (a recording, not part of a test's outcome). */
export async function keepTrace(trace: ControllerTrace): Promise<string | undefined> {
  if (process.env.KUBE_RUNBOOK_RECORD_TRACES !== '1') return undefined;
  const file = traceFixture(trace.release, trace.scenario);
  await writeFile(file, `${JSON.stringify(trace, null, 1)}\n`);
  return file;
}

/** The lab's controller settings as the forecast reads them. */
export const labLifecycleSettings = (lab: LabInfo): LifecycleSettings => ({
  nodeMonitorGracePeriodMs: lab.settings.nodeMonitorGracePeriod,
  nodeMonitorPeriodMs: lab.settings.nodeMonitorPeriod,
  nodeStartupGracePeriodMs: lab.settings.nodeStartupGracePeriod,
  nodeEvictionRate: lab.settings.nodeEvictionRate,
  secondaryNodeEvictionRate: lab.settings.secondaryNodeEvictionRate,
  unhealthyZoneThreshold: lab.settings.unhealthyZoneThreshold,
  largeClusterSizeThreshold: lab.settings.largeClusterSizeThreshold,
  leaseDurationMs: lab.settings.leaseDuration,
});
