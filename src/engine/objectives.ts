import type { Ctx } from '../contract/context.js';
import { formatDuration } from '../core/duration.js';
import type { ObjectiveEvent, RunEvent, RunEventSink } from './events.js';
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
  private readonly probes: Promise<void>[] = [];

  constructor(
    objectives: readonly PlannedObjective[],
    private readonly ctx: Ctx,
    private readonly emit: RunEventSink,
  ) {
    this.clocks = objectives.map((objective) => ({ objective, okSince: null, last: 'no reading yet' }));
  }

  start(): void {
    for (const c of this.clocks)
      this.probes.push(
        consumeProbe(this.ctx, c.objective.probe, c.objective.params, this.stop.signal, (r) => {
          c.okSince = r.status === 'ok' ? (c.okSince ?? r.at) : null;
          c.last = `${r.status}: ${r.detail}`;
          this.decide(c, this.ctx.clock.now());
        }),
      );
  }

  /** Run events the clocks start on: a named step's start, a fault's revert. */
  readonly onEvent = (e: RunEvent): void => {
    if (e.type === 'step-start')
      for (const c of this.clocks)
        if (typeof c.objective.from === 'object' && c.objective.from.step === e.name) this.begin(c, e.at, `step "${e.name}" started`);
    if (e.type === 'fault-reverted' && !e.fault.remediation) this.lastRevert = Math.max(this.lastRevert ?? 0, e.at);
  };

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
      if (c.startedAt === undefined)
        this.end(c, 'unmeasured', now(), `its clock never started: step "${(c.objective.from as { step: string }).step}" did not run`);
    while (!signal.aborted && this.clocks.some((c) => !c.decided)) {
      for (const c of this.clocks) this.decide(c, now());
      if (this.clocks.every((c) => c.decided)) break;
      await this.ctx.clock.sleep(TICK_MS, signal).catch(() => undefined);
    }
    for (const c of this.clocks) if (!c.decided) this.end(c, 'unmeasured', now(), `stopped before it was decided (last reading ${c.last})`);
    this.stop.abort();
    await Promise.all(this.probes);
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
  }

  private end(c: ObjectiveClock, phase: 'met' | 'missed' | 'unmeasured', at: number, detail: string, recoveryMs?: number): void {
    c.decided = phase;
    this.emit({
      type: 'objective',
      at,
      name: c.objective.name,
      phase,
      detail,
      withinMs: c.objective.withinMs,
      startedAt: c.startedAt,
      recoveryMs,
    });
  }
}
