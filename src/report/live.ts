import { Listr, type ListrTaskWrapper } from 'listr2';
import type { RedactedEvent } from '../engine/sinks.js';
import type { RunEvent } from '../engine/events.js';
import type { Plan } from '../engine/plan.js';
import { attemptLine, onAttempt } from './attempts.js';

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
  reject(e: Error): void;
  skip?: string;
  done: boolean;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  const d: Deferred = {
    promise,
    done: false,
    resolve: () => {
      d.done = true;
      resolve();
    },
    reject: (e) => {
      d.done = true;
      reject(e);
    },
  };
  return d;
}

type Task = ListrTaskWrapper<unknown, never, never>;

const FAULT_VERB = {
  'fault-applied': 'applied',
  'fault-reverted': 'reverted',
  'fault-apply-failed': 'FAILED apply',
  'fault-revert-failed': 'FAILED revert',
} as const;

/** A fault applied or reverted, or failing to be: its action, node, the revert's attempts, the error. */
export function faultLine(e: Extract<RunEvent, { type: keyof typeof FAULT_VERB }>): string {
  const tries = e.type === 'fault-reverted' || e.type === 'fault-revert-failed' ? onAttempt(e.attempts, e.retried) : '';
  const error = e.type === 'fault-apply-failed' || e.type === 'fault-revert-failed' ? `: ${e.error}` : '';
  return `${FAULT_VERB[e.type]} ${e.fault.action}${e.fault.node ? ` on ${e.fault.node}` : ''}${tries ? ` ${tries}` : ''}${error}`;
}

/**
 * The live task list on a terminal (listr2): preflight, each step, rollback; the running task shows the guards'
 * latest readings under it. Driven only by run events.
 */
export function liveRenderer(plan: Plan): { onEvent(e: RedactedEvent): void; stop(): Promise<void> } {
  const view = new LiveView(plan);
  return { onEvent: (e) => view.onEvent(e), stop: () => view.stop() };
}

/** The line an event adds under the running task, if any. */
function eventLine(e: RedactedEvent): string | undefined {
  switch (e.type) {
    case 'preflight':
      return `${e.ok ? '✔' : '✖'} ${e.check}: ${e.detail}`;
    case 'fault-applied':
    case 'fault-reverted':
    case 'fault-apply-failed':
    case 'fault-revert-failed':
      return faultLine(e);
    case 'attempt':
      return e.retryInMs === undefined && e.op === 'revert' ? undefined : attemptLine(e);
    case 'guard-fired':
      return `⚑ ${e.guard} → ${e.response}: ${e.detail}`;
    case 'remediation':
      return `⛑ ${e.detail}`;
    case 'rollback-wait':
      return e.detail;
    default:
      return undefined;
  }
}

/** The task list, a task per phase ended by the run's events, and the lines shown under the running task. */
class LiveView {
  private readonly preflight = deferred();
  private readonly steps: Map<string, Deferred>;
  private readonly rollback = deferred();
  private readonly guards = new Map<string, string>();
  private current: Task | undefined;
  private readonly lines: string[] = [];
  private readonly running: Promise<unknown>;

  constructor(plan: Plan) {
    this.steps = new Map(plan.steps.map((s) => [s.index, deferred()]));
    const list = new Listr(
      [
        this.wrap('preflight', this.preflight),
        ...plan.steps.map((s) => this.wrap(`${s.index}. ${s.name}`, this.steps.get(s.index)!)),
        this.wrap('rollback (always)', this.rollback),
      ],
      { concurrent: false, exitOnError: false },
    );
    this.running = list.run().catch(() => {});
  }

  onEvent(e: RedactedEvent): void {
    const line = eventLine(e);
    if (line !== undefined) {
      this.lines.push(line);
      this.show();
    }
    this.advance(e);
  }

  async stop(): Promise<void> {
    await this.running;
  }

  private show(): void {
    if (!this.current) return;
    const g = [...this.guards.entries()].map(([name, text]) => `guard ${name}: ${text}`);
    this.current.output = [...this.lines.slice(-4), ...g].join('\n');
  }

  /** A task that runs until its phase ends: passed, failed (its title kept in the error) or skipped. */
  private wrap(title: string, d: Deferred) {
    return {
      title,
      task: async (_: unknown, task: Task) => {
        this.current = task;
        this.lines.length = 0;
        this.show();
        try {
          await d.promise;
        } catch (e) {
          // listr2 shows the error in place of the title: keep the title in it
          throw new Error(`${title} — ${(e as Error).message}`, { cause: e });
        }
        if (d.skip) task.skip(`${title} — ${d.skip}`);
      },
    };
  }

  /** Skips preflight and the steps not ended yet. */
  private settleRest(why: string): void {
    for (const d of [this.preflight, ...this.steps.values()])
      if (!d.done) {
        d.skip = why;
        d.resolve();
      }
  }

  /** Ends the phases the event ends, and keeps the guards' latest readings. */
  private advance(e: RedactedEvent): void {
    switch (e.type) {
      case 'preflight':
        if (!e.ok) this.preflight.reject(new Error(`${e.check}: ${e.detail}`));
        break;
      case 'step-start':
        if (!this.preflight.done) this.preflight.resolve();
        break;
      case 'step-end': {
        const d = this.steps.get(e.index);
        if (d && !d.done) {
          if (e.status === 'passed') d.resolve();
          else d.reject(new Error(`${e.status}: ${e.detail}`));
        } else {
          this.lines.push(`${e.status === 'passed' ? '✔' : '✖'} ${e.index}. ${e.name}`);
          this.show();
        }
        break;
      }
      case 'guard-reading':
        this.guards.set(e.guard, `${e.reading.status} — ${e.reading.detail}`);
        this.show();
        break;
      case 'rollback-start':
        this.settleRest(`skipped: ${e.reason}`);
        break;
      case 'rollback-end':
        if (e.complete) this.rollback.resolve();
        else this.rollback.reject(new Error(`${e.remaining.length} fault(s) still applied`));
        break;
      case 'run-end':
        this.settleRest(e.reason);
        if (!this.rollback.done) {
          this.rollback.skip = e.remaining.length ? `${e.remaining.length} still applied` : 'nothing to revert';
          this.rollback.resolve();
        }
        break;
      default:
        break;
    }
  }
}
