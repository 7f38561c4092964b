import type { LifecycleSettings, NodeColumns, NodeForecast } from './model.js';
import { isControllerTaint, latestHeartbeatOrNaN } from './model.js';
import type { ForecastScratch } from './scratch.js';
import type { SlimTaint } from '../kube/resources.js';
import { NOT_READY, UNREACHABLE } from '../kube/tolerations.js';

/*
 * The eviction forecast's work per node (forecast.ts): when each node can go NotReady and be queued for the NoExecute
 * taint, worked out once per judgement into typed arrays.
 */

const NEVER = Infinity;

/** What a node's flags in a judgement say (Judged.flags). */
const SILENT = 1;
export const NOT_READY_NOW = 2;
export const TAINTED = 4;
export const EXCLUDED = 8;
export const KEEPS_TAINT = 16;
export const FAILING = SILENT | NOT_READY_NOW | TAINTED;

/** Why a node's taint is not coming (Judged.held): none, or one of these. */
const HELD = ['', 'all zones disrupted: evictions stopped', 'zone partially disrupted: tainting stopped'] as const;

/**
 * What a judgement works out per node, by the node's place in name order, in typed arrays rather than an object per
 * node: with thousands of nodes failing at once a judgement is bound by reading memory, and each pass below reads
 * only the few numbers it needs, side by side. Times are in ms; NaN stands for none.
 */
export class Judged {
  readonly flags: Uint8Array;
  readonly held: Uint8Array;
  /** The node's zone, an index into the judgement's zone names. */
  readonly zone: Int32Array;
  readonly lastHeartbeat: Float64Array;
  readonly notReadyAt: Float64Array;
  /** Earliest and latest moment the controller can see the node NotReady (NEVER: stays Ready). */
  readonly downEarly: Float64Array;
  readonly downLate: Float64Array;
  /** The earliest and the latest moment it can be queued for the NoExecute taint. */
  readonly eligible: Float64Array;
  readonly eligibleLate: Float64Array;
  /** When its NoExecute taint was added, or can be at the earliest. */
  readonly taintAt: Float64Array;
  /** The controller's NoExecute taint on it, had or to come. */
  readonly controllerTaint: (SlimTaint | undefined)[];

  /** For `n` nodes, in `scratch`'s memory; every column is written by judgeNode and the forecast, `held` is cleared. */
  constructor(n: number, scratch: ForecastScratch) {
    const bytes = scratch.buffer('judged', n * (7 * 8 + 4 + 2));
    const times = (k: number) => new Float64Array(bytes, k * n * 8, n);
    [this.lastHeartbeat, this.notReadyAt, this.downEarly, this.downLate, this.eligible, this.eligibleLate, this.taintAt] = [0, 1, 2, 3, 4, 5, 6].map(times) as [Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array, Float64Array];
    this.zone = new Int32Array(bytes, 7 * n * 8, n);
    this.flags = new Uint8Array(bytes, 7 * n * 8 + 4 * n, n);
    this.held = new Uint8Array(bytes, 7 * n * 8 + 5 * n, n).fill(0);
    this.controllerTaint = scratch.taints;
    this.controllerTaint.length = n;
  }
}

/** The taint the controller puts on a node it sees NotReady (Ready=False) or Unknown; shared, never changed. */
const NOT_READY_TAINT: Readonly<SlimTaint> = Object.freeze({ key: NOT_READY, effect: 'NoExecute' });
const UNREACHABLE_TAINT: Readonly<SlimTaint> = Object.freeze({ key: UNREACHABLE, effect: 'NoExecute' });

export const NOT_READY_TAINTS: readonly SlimTaint[] = Object.freeze([NOT_READY_TAINT]);
export const UNREACHABLE_TAINTS: readonly SlimTaint[] = Object.freeze([UNREACHABLE_TAINT]);
const NO_TAINTS: readonly SlimTaint[] = Object.freeze([]);

/** The NoExecute taints a failing node's pods are judged on: its own, and the controller's (`c`), had or to come. */
export function noExecuteOn(taints: readonly SlimTaint[], c: SlimTaint | undefined): readonly SlimTaint[] {
  let own: SlimTaint[] | undefined;
  for (const t of taints) if (t.effect === 'NoExecute' && !isControllerTaint(t)) (own ??= []).push(t);
  if (!c) return own ?? NO_TAINTS;
  // the usual case: one of two arrays shared by every node, so that toleration times are worked out once for all
  if (!own && c.value === undefined) return c.key === NOT_READY ? NOT_READY_TAINTS : UNREACHABLE_TAINTS;
  return [...(own ?? []), c];
}

/** Works out node `i`'s times and flags in `j`. */
export function judgeNode(j: Judged, i: number, c: NodeColumns, now: number, s: LifecycleSettings, silentAfter: number, taintDelay: number): void {
  const P = s.nodeMonitorPeriodMs;
  const status = c.status[i];
  const transition = Number.isNaN(c.transition[i]!) ? now : c.transition[i]!;
  const last = latestHeartbeatOrNaN(c.leaseRenew[i]!, c.heartbeat[i]!, c.created[i]!);
  const lastHeartbeat = Number.isNaN(last) ? undefined : last;
  const grace = status !== undefined ? s.nodeMonitorGracePeriodMs : s.nodeStartupGracePeriodMs;
  const silent = lastHeartbeat === undefined || now - lastHeartbeat > silentAfter;
  const notReady = status !== 'True';
  let controllerTaintNow: SlimTaint | undefined;
  for (const t of c.taints[i]!)
    if (isControllerTaint(t)) {
      controllerTaintNow = t;
      break;
    }
  j.flags[i] = (silent ? SILENT : 0) | (notReady ? NOT_READY_NOW : 0) | (controllerTaintNow ? TAINTED : 0) | (c.excluded[i] ? EXCLUDED : 0);
  j.lastHeartbeat[i] = lastHeartbeat ?? NaN;
  const since = c.taintedSince[i]!;
  j.taintAt[i] = controllerTaintNow ? (Number.isNaN(since) ? (controllerTaintNow.timeAdded ?? now) : since) : NaN;
  const predictedDown = (lastHeartbeat ?? now) + grace;
  j.notReadyAt[i] = notReady ? transition : predictedDown;
  let downEarly = NEVER;
  let downLate = NEVER;
  let eligible = NEVER;
  if (notReady) {
    // Counted NotReady from now on; with heartbeats back (Unknown but renewing) it may turn Ready any moment.
    downEarly = -NEVER;
    downLate = silent || status === 'False' ? -NEVER : NEVER;
    // Ready=False is queued for the taint at once; Unknown at once too, or one pass after the controller set it on
    // versions that read back the condition they wrote (taintDelay)
    eligible = transition + (status === 'False' ? 0 : taintDelay);
  } else if (silent) {
    downEarly = Math.max(predictedDown, now);
    downLate = Math.max(predictedDown + 2 * P + 1000, now);
    eligible = downEarly + taintDelay;
  }
  j.downEarly[i] = downEarly;
  j.downLate[i] = downLate;
  j.eligible[i] = eligible;
  j.eligibleLate[i] = Number.isFinite(downLate) && !notReady ? downLate + taintDelay : eligible;
  j.controllerTaint[i] = controllerTaintNow ?? (notReady || silent ? (status === 'False' ? NOT_READY_TAINT : UNREACHABLE_TAINT) : undefined);
}

/** Node `i` as the forecast reports it. */
export function nodeForecast(j: Judged, i: number, c: NodeColumns): NodeForecast {
  const flags = j.flags[i]!;
  const last = j.lastHeartbeat[i]!;
  const taintAt = j.taintAt[i]!;
  const f: NodeForecast = {
    name: c.name[i]!,
    zone: c.zone[i]!,
    lastHeartbeat: Number.isNaN(last) ? undefined : last,
    silent: (flags & SILENT) !== 0,
    notReady: (flags & NOT_READY_NOW) !== 0,
    tainted: (flags & TAINTED) !== 0,
    taintAt: Number.isNaN(taintAt) ? undefined : taintAt,
    notReadyAt: j.notReadyAt[i]!,
  };
  if (flags & KEEPS_TAINT) f.keepsTaint = true;
  if (j.held[i]) f.held = HELD[j.held[i]!];
  return f;
}
