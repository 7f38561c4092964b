import type { ExecutorTasks, ExitObject } from '../contract/context.js';
import { KrError, messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { ExitWatch } from './exit-watch.js';

interface Running {
  stop: AbortController;
  done: Promise<void>;
}

/**
 * The work actions run in this process (ExecutorTasks): each under its key until its action's revert stops it, until
 * `stopAll` (the end of the run, or a run stopped at once), or until the process ends; with an ExitWatch, the cluster
 * objects that work made are deleted by the watcher if the process ends before their revert.
 */
export class RunTasks implements ExecutorTasks {
  private readonly running = new Map<string, Running>();
  readonly deleteOnExit?: (key: string, objects: readonly ExitObject[]) => void;
  readonly forgetOnExit?: (key: string) => void;

  constructor(
    private readonly log: Logger,
    exitWatch?: ExitWatch,
  ) {
    if (!exitWatch) return;
    this.deleteOnExit = (key, objects) => exitWatch.add(key, objects);
    this.forgetOnExit = (key) => exitWatch.forget(key);
  }

  start(key: string, run: (signal: AbortSignal) => Promise<void>): void {
    if (this.running.has(key)) throw new KrError('TASK_RUNNING', `work under ${key} runs already in this process`);
    const stop = new AbortController();
    const done = Promise.resolve()
      .then(() => run(stop.signal))
      .catch((e: unknown) => this.log.warn(`${key} stopped on an error: ${messageOf(e)}`))
      .finally(() => {
        if (this.running.get(key)?.stop === stop) this.running.delete(key);
      });
    this.running.set(key, { stop, done });
  }

  async stop(key: string): Promise<void> {
    const r = this.running.get(key);
    if (!r) return;
    r.stop.abort(new Error('stopped'));
    await r.done;
  }

  /** Stops everything still running and waits for it to end. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((k) => this.stop(k)));
  }

  /** The keys running now. */
  get keys(): string[] {
    return [...this.running.keys()];
  }
}
