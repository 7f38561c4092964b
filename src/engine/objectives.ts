import type { Ctx } from '../contract/context.js';
import { REPORTED_ENTRIES, type Reading } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import type { ObjectiveEvent, ObjectiveNodes, RunEvent, RunEventSink } from './events.js';
import type { PlannedObjective } from './plan.js';
import { consumeProbe } from './probe-stream.js';

/** How often undecided clocks are looked at while the run waits for them (their readings decide, this only ends waits). */
const TICK_MS = 250;

interface ObjectiveClock {
  objective: PlannedObjective;
  /** When its clock started; undefined until then. */
  startedAt?: number;
  /** Since when its probe has read ok without a break; null while it does not. */
  okSince: number | null;
  last: string;
  decided?: ObjectiveEvent['phase'];
  /** Per node, for a probe that judges nodes one by one (`notOkNodes`); absent for the others. */
  nodes?: NodeMarks;
  /** Cancels the timer that decides it when its ok streak has held long enough, or its time is up. */
  cancelRecheck?: () => void;
}

/**
 * Each node a probe has held not ok: when it last was, and the first reading since that held it ok again (undefined
 * while it is not). A node that breaks again after it recovered starts over.
 */
class NodeMarks {
  private readonly marks = new Map<string, { lastBadAt: number; okAgainAt?: number }>();
  private bad = new Set<string>();

  constructor(private readonly notOk: (value: unknown) => readonly string[]) {}

  /** An unknown reading says nothing about any node. */
  read(r: Reading): void {
    if (r.status === 'unknown' || r.value === null || r.value === undefined) return;
    const now = new Set(this.notOk(r.value));
    for (const n of now) this.marks.set(n, { lastBadAt: r.at });
    for (const n of this.bad) if (!now.has(n)) this.marks.get(n)!.okAgainAt = r.at;
    this.bad = now;
  }

  /** Each node broken at `startedAt` or after it: its time to recover from `startedAt`, or still not ok. */
  summary(startedAt: number): ObjectiveNodes {
    const times: { node: string; ms: number }[] = [];
    const still: string[] = [];
    for (const [node, m] of this.marks)
      if (m.okAgainAt === undefined) still.push(node);
      else if (m.okAgainAt > startedAt) times.push({ node, ms: m.okAgainAt - startedAt });
    times.sort((a, b) => a.ms - b.ms);
    const slowest = times.at(-1);
    return {
      recovered: times.length,
      ...(slowest ? { p50Ms: times[Math.ceil(times.length / 2) - 1]!.ms, maxMs: slowest.ms, slowest: slowest.node } : {}),
      notRecovered: still.length,
      notRecoveredNames: still.sort().slice(0, REPORTED_ENTRIES),
    };
  }
}

/**
 * The run's recovery objectives: each objective's probe is read from the start of the run (so a condition that never
 * broke is met at once), its clock starts when the run's last fault is reverted or when its step starts, and it
 * stops at the first ok reading after that which stays ok for `holdFor`. `settle` waits, after the rollback, until
 * every clock is met or missed.
 */
export class ObjectiveClocks {
  private readonly clocks: ObjectiveClock[];
  private readonly stop = new AbortController();
  private lastRevert: number | undefined;
  /** Per action step (FaultRef.step): its faults applied, and reverted. */
  private readonly faultsOf = new Map<string, { applied: number; reverted: number }>();
  private readonly probes: Promise<void>[] = [];

  constructor(
    objectives: readonly PlannedObjective[],
    private readonly ctx: Ctx,
    private readonly emit: RunEventSink,
  ) {
    this.clocks = objectives.map((objective) => {
      const notOk = objective.probe.meta.notOkNodes;
      return { objective, okSince: null, last: 'no reading yet', ...(notOk ? { nodes: new NodeMarks(notOk) } : {}) };
    });
  }

  start(): void {
    for (const c of this.clocks)
      this.probes.push(
        consumeProbe(this.ctx, c.objective.probe, c.objective.params, this.stop.signal, (r) => {
          c.okSince = r.status === 'ok' ? (c.okSince ?? r.at) : null;
          c.last = `${r.status}: ${r.detail}`;
          if (!c.decided) c.nodes?.read(r);
          this.decide(c, this.ctx.clock.now());
        }),
      );
  }

  /** Run events the clocks start on: a named step's start, a fault's revert, the last of a step's faults reverted. */
  readonly onEvent = (e: RunEvent): void => {
    if (e.type === 'step-start')
      for (const c of this.clocks) {
        const from = c.objective.from;
        if (typeof from === 'object' && 'step' in from && from.step === e.name) this.begin(c, e.at, `step "${e.name}" started`);
      }
    if (e.type === 'fault-applied') this.countOf(e.fault.step).applied++;
    if (e.type === 'fault-reverted') {
      if (!e.fault.remediation) this.lastRevert = Math.max(this.lastRevert ?? 0, e.at);
      const n = this.countOf(e.fault.step);
      n.reverted++;
      if (n.reverted === n.applied)
        for (const c of this.clocks) {
          const from = c.objective.from;
          if (typeof from === 'object' && 'revertOf' in from && from.label === e.fault.step)
            this.begin(c, e.at, `the faults of step "${from.revertOf}" were reverted`);
        }
    }
  };

  private countOf(step: string): { applied: number; reverted: number } {
    let n = this.faultsOf.get(step);
    if (!n) this.faultsOf.set(step, (n = { applied: 0, reverted: 0 }));
    return n;
  }

  /**
   * After the rollback: the `revert` clocks start at the last fault's revert (the rollback's end when nothing was
   * applied), and the run waits until every clock is decided or `signal` aborts (an interrupt: those left are unmeasured).
   */
  async settle(rolledBackAt: number, signal: AbortSignal): Promise<void> {
    for (const c of this.clocks)
      if (c.objective.from === 'revert')
        this.begin(
          c,
          this.lastRevert ?? rolledBackAt,
          this.lastRevert === undefined ? 'nothing was applied' : 'the last fault was reverted',
        );
    const now = () => this.ctx.clock.now();
    for (const c of this.clocks)
      if (c.startedAt === undefined) this.end(c, 'unmeasured', now(), `its clock never started: ${this.notStarted(c)}`);
    while (!signal.aborted && this.clocks.some((c) => !c.decided)) {
      for (const c of this.clocks) this.decide(c, now());
      if (this.clocks.every((c) => c.decided)) break;
      await this.ctx.clock.sleep(TICK_MS, signal).catch(() => undefined);
    }
    for (const c of this.clocks) if (!c.decided) this.end(c, 'unmeasured', now(), `stopped before it was decided (last reading ${c.last})`);
    this.stop.abort();
    await Promise.all(this.probes);
  }

  private notStarted(c: ObjectiveClock): string {
    const from = c.objective.from;
    if (typeof from !== 'object') return 'nothing was reverted';
    if ('step' in from) return `step "${from.step}" did not run`;
    const n = this.faultsOf.get(from.label);
    return n?.applied
      ? `${n.applied - n.reverted} of step "${from.revertOf}"'s faults were not reverted`
      : `step "${from.revertOf}" applied nothing`;
  }

  /** Whether any objective was missed. */
  get missed(): string[] {
    return this.clocks.filter((c) => c.decided === 'missed').map((c) => c.objective.name);
  }

  private begin(c: ObjectiveClock, at: number, why: string): void {
    if (c.startedAt !== undefined) return;
    c.startedAt = at;
    this.emit({
      type: 'objective',
      at,
      name: c.objective.name,
      phase: 'start',
      detail: why,
      withinMs: c.objective.withinMs,
      startedAt: at,
    });
    this.decide(c, this.ctx.clock.now());
  }

  /** Met once an ok streak that began within the objective has lasted holdFor; missed once none can. */
  private decide(c: ObjectiveClock, now: number): void {
    const o = c.objective;
    if (c.decided || c.startedAt === undefined) return;
    const deadline = c.startedAt + o.withinMs;
    const since = c.okSince === null ? null : Math.max(c.okSince, c.startedAt);
    if (since !== null && since <= deadline && now - since >= o.holdForMs) {
      const recoveryMs = since - c.startedAt;
      this.end(
        c,
        'met',
        now,
        `${o.probeId} ok ${formatDuration(recoveryMs)} after the clock started and for ${formatDuration(now - since)} since (objective ${formatDuration(o.withinMs)})`,
        recoveryMs,
      );
    } else if ((since === null || since > deadline) && now > deadline)
      this.end(c, 'missed', now, `${o.probeId} not ok within ${formatDuration(o.withinMs)} (last reading ${c.last})`);
    // no reading may come for a while: decide on time all the same
    else this.recheck(c, since !== null && since <= deadline ? since + o.holdForMs : deadline + 1, now);
  }

  private recheck(c: ObjectiveClock, at: number, now: number): void {
    c.cancelRecheck?.();
    c.cancelRecheck = this.ctx.clock.setTimer(Math.max(0, at - now), () => this.decide(c, this.ctx.clock.now()));
  }

  private end(c: ObjectiveClock, phase: 'met' | 'missed' | 'unmeasured', at: number, detail: string, recoveryMs?: number): void {
    c.decided = phase;
    c.cancelRecheck?.();
    const nodes = phase !== 'unmeasured' && c.startedAt !== undefined ? c.nodes?.summary(c.startedAt) : undefined;
    this.emit({
      type: 'objective',
      at,
      name: c.objective.name,
      phase,
      detail: nodes ? `${detail}; ${nodesText(nodes)}` : detail,
      withinMs: c.objective.withinMs,
      startedAt: c.startedAt,
      recoveryMs,
      ...(nodes ? { nodes } : {}),
    });
  }
}

/** One line: how long the nodes took, and which have not recovered. */
function nodesText(n: ObjectiveNodes): string {
  const parts = [
    n.recovered
      ? `${n.recovered} node(s) recovered, p50 ${formatDuration(n.p50Ms!)}, max ${formatDuration(n.maxMs!)} (${n.slowest})`
      : 'no node was broken while the clock ran',
  ];
  if (n.notRecovered)
    parts.push(
      `${n.notRecovered} not recovered: ${n.notRecoveredNames.join(', ')}${n.notRecovered > n.notRecoveredNames.length ? ', …' : ''}`,
    );
  return parts.join('; ');
}
