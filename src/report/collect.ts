import { type NodeFactKind, readingFacts, type ReadingFacts } from '../contract/node-facts.js';
import { type ReadingNumbers, readingNumbers } from '../contract/reading-numbers.js';
import { ThinnedHistory } from './thinned.js';
import type { Attempt, FaultRef, ObjectiveNodes, RunStatus, StepKind, StepStatus } from '../engine/events.js';
import type { RedactedEvent } from '../engine/sinks.js';
import { NodeTracker, type NodeSeries } from './nodes.js';
import { REPORT_VERSION } from './schema.js';

export interface StepRecord {
  index: string;
  name: string;
  kind: StepKind;
  startedAt: string;
  endedAt?: string;
  status?: StepStatus;
  detail?: string;
  /** An expect step's readings: what its probe read (status, detail, value with lists cut to 100 entries), thinned as a guard's. */
  readings?: ReadingEntry[];
}

/** One reading of a probe as a report keeps it. */
export interface ReadingEntry {
  at: string;
  status: string;
  detail: string;
  value: unknown;
  /** The numbers its probe declares of the value (`meta.numbers`), the first 100 by name, charted as curves. */
  numbers?: ReadingNumbers;
  /** The eviction its probe predicted first at that reading (an `eviction` node fact), for the timeline's marks. */
  eviction?: PredictedEviction;
}

/** A predicted eviction as a report keeps it. */
export interface PredictedEviction {
  at: string;
  pod: string;
  node: string;
}

/** A pod deleted as a report keeps it (a `deleted` node fact; `at` in ms). */
export interface DeletedPod {
  pod: string;
  node: string;
  at: number;
  cause: string;
}

/** Readings kept per guard and per expect step. */
const MAX_READINGS = 200;
/**
 * Entries kept of each list in a kept reading's value; `<list>LeftOut` counts the rest. A node-leases reading over
 * 5,000 nodes lists 5,000 leases: 200 of them kept whole would be a million objects in memory and in report.json,
 * while the reading's detail already names the nodes that matter.
 */
const MAX_LIST = 100;

export interface FaultRecord extends FaultRef {
  appliedAt?: string;
  revertedAt?: string;
  error?: string;
  status: 'applied' | 'reverted' | 'apply-failed' | 'revert-failed';
  /** Attempts at its revert, and the kinds of the transient failures before the last ("reverted on attempt 3 after 2 connection resets"). */
  attempts?: number;
  retried?: string[];
}

/** A failed attempt at something retried: a fault's revert, arm or disarm, a keepalive, a preflight check. */
export interface AttemptEntry extends Attempt {
  at: string;
  faultId?: string;
  fault?: FaultRef;
  node?: string;
  what?: string;
}

/** Attempts kept in a report; past that they are counted in `attemptsDropped`. */
const MAX_ATTEMPTS = 1000;

export interface RunReport {
  /** The version of this shape (src/report/schema.ts); `kube-runbook report` refuses newer ones. */
  reportVersion: typeof REPORT_VERSION;
  runId: string;
  runbook: string;
  context: string;
  status: RunStatus | 'running';
  reason: string;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  preflight: { check: string; ok: boolean; detail: string }[];
  steps: StepRecord[];
  guardFirings: { at: string; guard: string; response: string; detail: string }[];
  guardTransitions: { at: string; guard: string; status: string; detail: string }[];
  /**
   * What each guard's probe read, by guard name (status, detail, value with lists cut to 100 entries): every violation
   * and change of status, and of the other readings an even sample over the whole run, about 200 (readingsThinned
   * says where that sample is not every reading).
   */
  guardReadings: Record<string, ReadingEntry[]>;
  /** Per guard or expect step whose readings were thinned: how many came, how many are kept, and every how many. */
  readingsThinned?: Record<string, { seen: number; kept: number; every: number }>;
  faults: FaultRecord[];
  /** Every failed attempt at something retried, in order. */
  attempts: AttemptEntry[];
  attemptsDropped?: number;
  /** When the rollback ran, why, and whether it reverted everything. */
  rollback?: { startedAt: string; endedAt?: string; reason: string; complete?: boolean };
  remaining: FaultRef[];
  recoverCommand?: string;
  /** Warnings of the run (a dead-man not disarmed, a run lock not renewed), in order. */
  warnings?: { at: string; message: string }[];
  /** Filled by observers of the run (e.g. pods deleted by eviction), keyed by observer. */
  observations: Record<string, unknown>;
  /**
   * Per node a fault targeted or a probe reported on (those that were stale, not Ready, tainted or lost pods, and a
   * few others): Lease age, Ready, NoExecute taints and pods deleted, as guards, expect steps and observers read them.
   */
  nodes: NodeSeries[];
  /** Nodes a probe reported on that `nodes` leaves out, past its cap. */
  nodesLeftOut?: number;
  /** The kinds of node fact the readings' probes give: where they give NoExecute taints or pods deleted, a node without any had none. */
  nodeFacts?: NodeFactKind[];
  /** The recovery objectives, in the order their clocks started: when each started and stopped, and the time to recover. */
  objectives?: ObjectiveRecord[];
}

/** A recovery objective's clock as the report keeps it. */
export interface ObjectiveRecord {
  name: string;
  status: 'running' | 'met' | 'missed' | 'unmeasured';
  withinMs: number;
  startedAt?: string;
  endedAt?: string;
  /** From the clock's start to the probe's first ok reading that stayed ok (met only). */
  recoveryMs?: number;
  /** Each node's time to recover, for a probe that judges nodes one by one (met or missed). */
  nodes?: ObjectiveNodes;
  detail: string;
}

const iso = (at: number) => new Date(at).toISOString();
/** The eviction a reading's facts predict first, if its probe gives predictions. */
function evictionOf(facts: ReadingFacts | undefined): { eviction?: PredictedEviction } {
  const e = facts?.facts.find((f) => f.kind === 'eviction');
  return e ? { eviction: { at: iso(e.at), pod: e.pod, node: e.node } } : {};
}

/** The pods a reading's facts say were deleted, if its probe tells of deleted pods. */
function deletedOf(facts: ReadingFacts | undefined): { deleted?: DeletedPod[] } {
  if (!facts?.kinds.includes('deleted')) return {};
  return { deleted: facts.facts.flatMap((f) => (f.kind === 'deleted' ? [{ pod: f.pod, node: f.node, at: f.at, cause: f.cause }] : [])) };
}

/** What a reading event's probe declares of it: its node facts, and its numbers (the first MAX_LIST by name, as of a list). */
type Declared = { facts?: ReadingFacts; numbers?: ReadingNumbers };
function declaredOf(e: EventOf<'guard-reading' | 'step-reading'>): Declared {
  const numbers = readingNumbers(e.numbers, e.reading.value);
  return {
    facts: readingFacts(e.nodeFacts, e.reading.value),
    numbers: numbers && Object.fromEntries(Object.entries(numbers).slice(0, MAX_LIST)),
  };
}

const entryOf = (at: number, r: { status: string; detail: string; value: unknown }, d: Declared): ReadingEntry => ({
  at: iso(at),
  status: r.status,
  detail: r.detail,
  value: bounded(r.value),
  ...(d.numbers ? { numbers: d.numbers } : {}),
  ...evictionOf(d.facts),
});

/** A value as a report keeps it: each list in it (at its top level) cut to MAX_LIST entries, the rest counted. */
function bounded(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const long = Object.entries(value).filter(([, v]) => Array.isArray(v) && v.length > MAX_LIST);
  if (long.length === 0) return value;
  const out: Record<string, unknown> = { ...value };
  for (const [k, v] of long as [string, unknown[]][]) {
    out[k] = v.slice(0, MAX_LIST);
    out[`${k}LeftOut`] = v.length - MAX_LIST;
  }
  return out;
}

/** The latest reading of an observer, and the history of its changes (values as the summarizer keeps them). */
export interface Observation {
  at: string;
  status: string;
  detail: string;
  value: unknown;
  /** The eviction its probe predicted first at the latest reading (an `eviction` node fact). */
  eviction?: PredictedEviction;
  /** The pods its latest reading says were deleted, for a probe that tells of them (`deleted` node facts). */
  deleted?: DeletedPod[];
  history: { at: string; status: string; detail: string; value: unknown; eviction?: PredictedEviction }[];
}

/** A report of a run not yet started: what the collector fills in. */
export const emptyReport = (): RunReport => ({
  reportVersion: REPORT_VERSION,
  runId: '',
  runbook: '',
  context: '',
  status: 'running',
  reason: '',
  startedAt: '',
  preflight: [],
  steps: [],
  guardFirings: [],
  guardTransitions: [],
  guardReadings: {},
  faults: [],
  attempts: [],
  remaining: [],
  observations: {},
  nodes: [],
});

/** Folds run events into the report (report.json, JUnit, HTML timeline are rendered from it). */
export class ReportCollector {
  readonly report: RunReport = emptyReport();
  private startedAt = 0;
  private guardStatus = new Map<string, string>();
  /** Per guard or expect step, its readings kept, and the status of the last one. */
  private readonly histories = new Map<string, { history: ThinnedHistory<ReadingEntry>; status?: string }>();
  private readonly tracker = new NodeTracker(this.report);

  /** `summarizers` keep, per observer, only what the report needs of a reading's value (the probe's `meta.report`). */
  constructor(private readonly summarizers: Record<string, (value: unknown) => unknown> = {}) {}

  /** Keeps a reading of `source` as its history allows: a violation or a change of status always. Returns the history. */
  private keep(
    source: string,
    at: number,
    reading: { status: string; detail: string; value: unknown },
    declared: Declared,
  ): ReadingEntry[] {
    let h = this.histories.get(source);
    if (!h) this.histories.set(source, (h = { history: new ThinnedHistory<ReadingEntry>(MAX_READINGS) }));
    h.history.push(entryOf(at, reading, declared), reading.status === 'violated' || reading.status !== h.status);
    h.status = reading.status;
    if (h.history.thinned)
      (this.report.readingsThinned ??= {})[source] = { seen: h.history.seen, kept: h.history.entries.length, every: h.history.every };
    return h.history.entries;
  }

  readonly onEvent = (e: RedactedEvent): void => {
    const r = this.report;
    switch (e.type) {
      case 'run-start':
        Object.assign(r, { runId: e.runId, runbook: e.runbook, context: e.context, startedAt: iso(e.at) });
        this.startedAt = e.at;
        break;
      case 'preflight':
        r.preflight.push({ check: e.check, ok: e.ok, detail: e.detail });
        break;
      case 'step-start':
        r.steps.push({ index: e.index, name: e.name, kind: e.kind, startedAt: iso(e.at) });
        break;
      case 'step-end': {
        const s = [...r.steps].reverse().find((x) => x.index === e.index);
        if (s) Object.assign(s, { endedAt: iso(e.at), status: e.status, detail: e.detail });
        break;
      }
      case 'fault-applied':
      case 'fault-apply-failed':
      case 'fault-reverted':
      case 'fault-revert-failed':
        this.fault(e);
        break;
      case 'attempt':
        this.attempt(e);
        break;
      case 'step-reading': {
        const declared = declaredOf(e);
        this.tracker.reading(`step ${e.index}`, 1, e.at, declared.facts);
        const s = [...r.steps].reverse().find((x) => x.index === e.index);
        if (s) s.readings = this.keep(`${s.index}. ${s.name}`, e.at, e.reading, declared);
        break;
      }
      case 'guard-reading':
        this.guardReading(e);
        break;
      case 'observation':
        this.observation(e);
        break;
      case 'rollback-start':
        r.rollback = { startedAt: iso(e.at), reason: e.reason };
        break;
      case 'rollback-end':
        if (r.rollback) Object.assign(r.rollback, { endedAt: iso(e.at), complete: e.complete });
        break;
      case 'guard-fired':
        r.guardFirings.push({ at: iso(e.at), guard: e.guard, response: e.response, detail: e.detail });
        break;
      case 'run-end':
        Object.assign(r, {
          status: e.status,
          reason: e.reason,
          endedAt: iso(e.at),
          durationMs: e.at - this.startedAt,
          remaining: e.remaining,
          recoverCommand: e.recoverCommand,
        });
        break;
      case 'objective':
        this.objective(e);
        break;
      case 'log':
        if (e.level !== 'info') (r.warnings ??= []).push({ at: iso(e.at), message: e.message });
        break;
      default:
        break;
    }
  };

  /** A fault applied or reverted, or failing to be. */
  private fault(e: EventOf<'fault-applied' | 'fault-apply-failed' | 'fault-reverted' | 'fault-revert-failed'>): void {
    const r = this.report;
    if (e.type === 'fault-applied' || e.type === 'fault-apply-failed') {
      if (e.fault.node) this.tracker.target(e.fault.node);
      if (e.type === 'fault-applied') r.faults.push({ ...e.fault, appliedAt: iso(e.at), status: 'applied' });
      else r.faults.push({ ...e.fault, status: 'apply-failed', error: e.error });
      return;
    }
    const f = r.faults.find((x) => x.faultId === e.fault.faultId);
    if (e.type === 'fault-revert-failed') {
      if (f) Object.assign(f, { status: 'revert-failed', error: e.error, attempts: e.attempts, retried: e.retried });
      return;
    }
    const done = { revertedAt: iso(e.at), status: 'reverted' as const, attempts: e.attempts, retried: e.retried };
    if (f) Object.assign(f, done, { error: undefined });
    else r.faults.push({ ...e.fault, ...done });
  }

  /** An attempt, up to MAX_ATTEMPTS of them; the rest counted. */
  private attempt(e: EventOf<'attempt'>): void {
    const r = this.report;
    if (r.attempts.length >= MAX_ATTEMPTS) {
      r.attemptsDropped = (r.attemptsDropped ?? 0) + 1;
      return;
    }
    const { type: _type, at, fault, ...rest } = e;
    r.attempts.push({ at: iso(at), ...(fault ? { faultId: fault.faultId, fault } : {}), ...rest });
  }

  /** A guard's reading kept, and its status when it changed. */
  private guardReading(e: EventOf<'guard-reading'>): void {
    const r = this.report;
    const declared = declaredOf(e);
    this.tracker.reading(`guard ${e.guard}`, 1, e.at, declared.facts);
    r.guardReadings[e.guard] = this.keep(`guard ${e.guard}`, e.at, e.reading, declared);
    if (this.guardStatus.get(e.guard) !== e.reading.status) {
      this.guardStatus.set(e.guard, e.reading.status);
      r.guardTransitions.push({ at: iso(e.at), guard: e.guard, status: e.reading.status, detail: e.reading.detail });
    }
  }

  /** An observer's latest reading (its value summarized), and its history of changes. */
  private observation(e: EventOf<'observation'>): void {
    const r = this.report;
    const facts = readingFacts(e.nodeFacts, e.reading.value);
    this.tracker.reading(`observer ${e.name}`, 2, e.at, facts);
    const summarize = this.summarizers[e.name] ?? ((v: unknown) => v);
    const prev = r.observations[e.name] as Observation | undefined;
    // an unknown reading has no value to summarise
    const value = e.reading.value === null ? null : summarize(e.reading.value);
    const entry = { at: iso(e.at), status: e.reading.status, detail: e.reading.detail, value, ...evictionOf(facts) };
    if (e.reading.status === 'unknown' && prev) return;
    const history = prev?.history ?? [];
    const changed = !prev || prev.status !== entry.status || JSON.stringify(prev.value) !== JSON.stringify(value);
    if (changed && history.length < 500) history.push(entry);
    r.observations[e.name] = { ...entry, history, ...deletedOf(facts) };
  }

  /** A recovery objective started, met or missed. */
  private objective(e: EventOf<'objective'>): void {
    const list = (this.report.objectives ??= []);
    let o = list.find((x) => x.name === e.name);
    if (!o) list.push((o = { name: e.name, status: 'running', withinMs: e.withinMs, detail: e.detail }));
    if (e.startedAt !== undefined) o.startedAt = iso(e.startedAt);
    if (e.phase !== 'start')
      Object.assign(
        o,
        { status: e.phase, endedAt: iso(e.at), detail: e.detail },
        e.recoveryMs === undefined ? {} : { recoveryMs: e.recoveryMs },
        e.nodes ? { nodes: e.nodes } : {},
      );
  }
}

/** One kind of the run's events. */
type EventOf<T extends RedactedEvent['type']> = Extract<RedactedEvent, { type: T }>;
