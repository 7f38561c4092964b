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

/**
 * The live task list on a terminal (listr2): preflight, each step, rollback; the running task shows the guards'
 * latest readings under it. Driven only by run events.
 */
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

export function liveRenderer(plan: Plan): { onEvent(e: RedactedEvent): void; stop(): Promise<void> } {
  const preflight = deferred();
  const steps = new Map(plan.steps.map((s) => [s.index, deferred()]));
  const rollback = deferred();
  const guards = new Map<string, string>();
  let current: Task | undefined;
  const lines: string[] = [];
  const show = () => {
    if (!current) return;
    const g = [...guards.entries()].map(([name, text]) => `guard ${name}: ${text}`);
    current.output = [...lines.slice(-4), ...g].join('\n');
  };
  const wrap = (title: string, d: Deferred) => ({
    title,
    task: async (_: unknown, task: Task) => {
      current = task;
      lines.length = 0;
      show();
      try {
        await d.promise;
      } catch (e) {
        // listr2 shows the error in place of the title: keep the title in it
        throw new Error(`${title} — ${(e as Error).message}`, { cause: e });
      }
      if (d.skip) task.skip(`${title} — ${d.skip}`);
    },
  });
  const list = new Listr(
    [
      wrap('preflight', preflight),
      ...plan.steps.map((s) => wrap(`${s.index}. ${s.name}`, steps.get(s.index)!)),
      wrap('rollback (always)', rollback),
    ],
    { concurrent: false, exitOnError: false },
  );
  const running = list.run().catch(() => {});
  const settleRest = (why: string) => {
    for (const d of [preflight, ...steps.values()])
      if (!d.done) {
        d.skip = why;
        d.resolve();
      }
  };

  return {
    onEvent(e) {
      switch (e.type) {
        case 'preflight':
          lines.push(`${e.ok ? '✔' : '✖'} ${e.check}: ${e.detail}`);
          show();
          if (!e.ok) preflight.reject(new Error(`${e.check}: ${e.detail}`));
          break;
        case 'step-start':
          if (!preflight.done) preflight.resolve();
          break;
        case 'step-end': {
          const d = steps.get(e.index);
          if (d && !d.done) {
            if (e.status === 'passed') d.resolve();
            else d.reject(new Error(`${e.status}: ${e.detail}`));
          } else {
            lines.push(`${e.status === 'passed' ? '✔' : '✖'} ${e.index}. ${e.name}`);
            show();
          }
          break;
        }
        case 'fault-applied':
        case 'fault-reverted':
        case 'fault-apply-failed':
        case 'fault-revert-failed':
          lines.push(faultLine(e));
          show();
          break;
        case 'attempt':
          if (e.retryInMs === undefined && e.op === 'revert') break;
          lines.push(attemptLine(e));
          show();
          break;
        case 'guard-reading':
          guards.set(e.guard, `${e.reading.status} — ${e.reading.detail}`);
          show();
          break;
        case 'guard-fired':
        case 'remediation':
          lines.push(e.type === 'guard-fired' ? `⚑ ${e.guard} → ${e.response}: ${e.detail}` : `⛑ ${e.detail}`);
          show();
          break;
        case 'rollback-start':
          settleRest(`skipped: ${e.reason}`);
          break;
        case 'rollback-wait':
          lines.push(e.detail);
          show();
          break;
        case 'rollback-end':
          if (e.complete) rollback.resolve();
          else rollback.reject(new Error(`${e.remaining.length} fault(s) still applied`));
          break;
        case 'run-end':
          settleRest(e.reason);
          if (!rollback.done) {
            rollback.skip = e.remaining.length ? `${e.remaining.length} still applied` : 'nothing to revert';
            rollback.resolve();
          }
          break;
        default:
          break;
      }
    },
    async stop() {
      await running;
    },
  };
}
