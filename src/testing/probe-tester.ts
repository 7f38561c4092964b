import { RunEffects } from '../engine/effects.js';
import type { z } from 'zod';
import { parseInventoryLoosely } from './loose-inventory.js';
import type { Ctx } from '../contract/context.js';
import { memoryLogger } from '../core/logger.js';
import type { Inventory } from '../inventory/schema.js';
import { type InventoryInput, type InventoryNode } from '../inventory/schema.js';
import { type FakeKubeAccess, fakeKubeAccess } from './fake-access.js';
import type { FakeApiServer } from './fake-source.js';
import { NODE_LEASE_NAMESPACE, paths } from '../kube/resources.js';
import type { RawObject } from '../kube/source.js';
import type { WatchOptions } from '../kube/watch-types.js';
import type { Probe, Reading } from '../contract/probe.js';
import { FakeClock } from './fake-clock.js';
import { FakeNodes } from './fake-nodes.js';
import { inventoryOf } from './inventories.js';

/**
 * A tester for probes in the spirit of eslint's RuleTester: an in-memory apiserver to write Nodes, Leases and
 * Pods into, a fake clock to move, and the readings a probe yields, collected as the engine would see them.
 */

export const iso = (t: number) => new Date(t).toISOString();

export interface ProbeRun {
  readonly readings: Reading[];
  last(): Reading | undefined;
  /** Advances the clock in steps until a reading matches (checking those already there first); fails after maxMs. */
  until(pred: (r: Reading) => boolean, maxMs?: number, stepMs?: number): Promise<Reading>;
  stop(): Promise<void>;
}

const labInventory: InventoryInput = inventoryOf({
  layout: 'lab',
  transport: { type: 'local' },
  controller: {
    nodeMonitorGracePeriod: '8s',
    nodeMonitorPeriod: '1s',
    nodeStartupGracePeriod: '60s',
    nodeEvictionRate: 0.1,
    secondaryNodeEvictionRate: 0.01,
    unhealthyZoneThreshold: 0.55,
    largeClusterSizeThreshold: 50,
    defaultTolerationSeconds: 30,
    leaseDuration: '8s',
  },
  lab: { stateDir: '/nonexistent/lab' },
  nodes: [
    { name: 'cp-1', roles: ['control-plane', 'etcd'] },
    { name: 'node-1', zone: 'zone-a' },
    { name: 'node-2', zone: 'zone-a' },
    { name: 'node-3', zone: 'zone-b' },
  ],
});

export class ProbeTester {
  readonly clock: FakeClock;
  readonly kube: FakeKubeAccess;
  readonly api: FakeApiServer;
  readonly log = memoryLogger();
  readonly inventory: Inventory;
  readonly nodes: FakeNodes;
  private readonly runs: ProbeRun[] = [];
  /** What the run holds applied that stops evictions (ctx.applied), for tests to set. */
  readonly applied = new RunEffects();
  /** How many judgements the probes started here made (through ctx.profile). */
  judgements = 0;
  /** How many watch changes they judged, counted each time in the judgement that took it in. */
  changesJudged = 0;

  constructor(o: { inventory?: InventoryInput; watch?: Partial<WatchOptions>; start?: number } = {}) {
    this.clock = new FakeClock(o.start);
    this.kube = fakeKubeAccess(this.clock, { log: this.log, watch: o.watch });
    this.api = this.kube.apiserver;
    this.inventory = parseInventoryLoosely(o.inventory ?? labInventory);
    this.nodes = new FakeNodes(this.inventory.spec.nodes as InventoryNode[]);
  }

  ctx(signal: AbortSignal): Ctx {
    return {
      runId: 'test',
      clock: this.clock,
      log: this.log,
      signal,
      dryRun: false,
      inventory: this.inventory,
      kube: this.kube,
      nodes: this.nodes,
      applied: this.applied,
      profile: {
        judge: <T>(fn: () => T, changes: number): T => {
          this.judgements++;
          this.changesJudged += changes;
          return fn();
        },
      },
    };
  }

  /** Starts a probe with `with:` params as a runbook would give them (defaults applied by its schema). */
  start<P extends z.ZodType>(probe: Probe<P>, params: z.input<P> | Record<string, unknown> = {}): ProbeRun {
    const ac = new AbortController();
    const readings: Reading[] = [];
    const parsed = probe.meta.params.parse(params);
    const it = probe.start(this.ctx(ac.signal), parsed)[Symbol.asyncIterator]();
    let failure: unknown;
    const pump = (async () => {
      try {
        for (;;) {
          const n = await it.next();
          if (n.done) return;
          readings.push(n.value);
        }
      } catch (e) {
        failure = e;
      }
    })();
    const clock = this.clock;
    let seen = 0;
    const run: ProbeRun = {
      readings,
      last: () => readings[readings.length - 1],
      async until(pred, maxMs = 120_000, stepMs = 100) {
        let found: Reading | undefined;
        const ok = await clock.runUntil(
          () => {
            if (failure) throw failure;
            for (; seen < readings.length && !found; seen++) if (pred(readings[seen]!)) found = readings[seen];
            return found !== undefined;
          },
          maxMs,
          stepMs,
        );
        if (!ok || !found)
          throw new Error(
            `no matching reading within ${maxMs} ms; last: ${JSON.stringify(readings[readings.length - 1] ?? null).slice(0, 400)}`,
          );
        return found;
      },
      async stop() {
        ac.abort();
        await clock.advance(0);
        await it.return?.(undefined);
        await pump;
      },
    };
    this.runs.push(run);
    return run;
  }

  advance(ms: number): Promise<void> {
    return this.clock.advance(ms);
  }

  async close(): Promise<void> {
    for (const r of this.runs) await r.stop();
    this.kube.close();
  }

  // ---- objects in the fake apiserver ----

  putNode(name: string, o: NodeFixture = {}): RawObject {
    return this.api.put(paths.nodes, rawNode(name, { heartbeat: this.clock.now(), ...o }));
  }

  /** Renews a node's Lease now (or at `at`). */
  renewLease(name: string, at = this.clock.now(), durationSeconds = 8): RawObject {
    return this.api.put(paths.nodeLeases, rawLease(NODE_LEASE_NAMESPACE, name, at, durationSeconds, name));
  }

  putPod(namespace: string, name: string, o: PodFixture = {}): RawObject {
    return this.api.put(paths.pods, rawPod(namespace, name, o));
  }

  /** Marks a pod for deletion as the apiserver does on DELETE with a grace period. */
  terminatePod(namespace: string, name: string, graceSeconds = 30, conditions: unknown[] = []): RawObject {
    return this.api.update(paths.pods, `${namespace}/${name}`, (p) => {
      p.metadata = {
        ...p.metadata,
        deletionTimestamp: iso(this.clock.now() + graceSeconds * 1000),
        deletionGracePeriodSeconds: graceSeconds,
      };
      if (conditions.length) (p.status as { conditions: unknown[] }).conditions.push(...conditions);
    });
  }
}

export interface NodeFixture {
  labels?: Record<string, string>;
  ready?: 'True' | 'False' | 'Unknown' | 'none';
  heartbeat?: number;
  transition?: number;
  taints?: { key: string; effect: string; value?: string; timeAdded?: number }[];
  created?: number;
}

function rawNode(name: string, o: NodeFixture = {}): RawObject {
  const conditions =
    o.ready === 'none'
      ? []
      : [
          {
            type: 'Ready',
            status: o.ready ?? 'True',
            lastHeartbeatTime: iso(o.heartbeat ?? 0),
            lastTransitionTime: iso(o.transition ?? o.heartbeat ?? 0),
            reason: o.ready === 'Unknown' ? 'NodeStatusUnknown' : 'KubeletReady',
          },
        ];
  return {
    metadata: { name, uid: `uid-${name}`, labels: { 'kubernetes.io/hostname': name, ...o.labels }, creationTimestamp: iso(o.created ?? 0) },
    spec: { taints: (o.taints ?? []).map((t) => ({ ...t, timeAdded: t.timeAdded === undefined ? undefined : iso(t.timeAdded) })) },
    status: { conditions },
  };
}

export function rawLease(namespace: string, name: string, renewTime: number, durationSeconds: number, holder: string): RawObject {
  return {
    metadata: { namespace, name },
    spec: { holderIdentity: holder, leaseDurationSeconds: durationSeconds, renewTime: iso(renewTime) },
  };
}

export interface PodFixture {
  node?: string;
  labels?: Record<string, string>;
  tolerations?: { key?: string; operator?: string; value?: string; effect?: string; tolerationSeconds?: number }[];
  ready?: boolean;
  uid?: string;
}

/** A pod as the apiserver stores it after admission: default tolerations of 30 s unless given. */
function rawPod(namespace: string, name: string, o: PodFixture = {}): RawObject {
  return {
    metadata: { namespace, name, uid: o.uid ?? `uid-${namespace}-${name}`, labels: o.labels ?? { app: name.replace(/-[^-]+$/, '') } },
    spec: {
      nodeName: o.node,
      tolerations: o.tolerations ?? [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 },
      ],
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: o.ready === false ? 'False' : 'True' }] },
  };
}
