import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { isSea } from 'node:sea';
import { fileURLToPath } from 'node:url';
import type { ExitObject } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { KubeSource } from '../kube/types.js';
import type { ExitWatchStart } from './exit-watcher.js';

/** How long the watcher keeps trying to delete what the executor left (an apiserver restarting, overloaded). */
const EXIT_WATCH_DEADLINE_MS = 300_000;

export interface ExitWatchOptions {
  runId: string;
  log: Logger;
  /** The cluster the objects are in, as the watcher loads it; undefined: no watcher (a fake cluster). */
  source: () => KubeSource | undefined;
  /** Where the watcher writes what it did (it has no terminal); undefined: nowhere. */
  logFile?: string;
  /** The command that runs `__exit-watch` (tests give their own). */
  command?: () => { file: string; args: string[] };
}

/**
 * The executor's end of the exit watcher (exit-watcher.ts): a process of this tool started on the first object
 * registered, in a session of its own (a Ctrl-C or a hang-up of the executor's terminal does not reach it), holding the
 * read end of a pipe only this process writes. Whatever ends this process closes the pipe, and the watcher deletes
 * what it still holds then: the executor-side counterpart of a node's dead-man, for cluster objects a run makes and
 * its revert removes.
 */
export class ExitWatch {
  private child: ChildProcess | undefined;
  private failed = false;

  constructor(private readonly o: ExitWatchOptions) {}

  add(key: string, objects: readonly ExitObject[]): void {
    if (objects.length) this.send({ add: key, objects });
  }

  forget(key: string): void {
    if (this.child) this.send({ forget: key });
  }

  private send(line: unknown): void {
    const child = this.child ?? this.start();
    if (!child?.stdin?.writable) return;
    child.stdin.write(`${JSON.stringify(line)}\n`);
  }

  private start(): ChildProcess | undefined {
    if (this.failed) return undefined;
    const why = (reason: string) => {
      this.failed = true;
      this.o.log.warn(
        `no exit watch (${reason}): if this process is killed, \`kube-runbook recover ${this.o.runId}\` removes what its faults made in the cluster`,
      );
      return undefined;
    };
    let logFd: number | 'ignore' = 'ignore';
    try {
      const source = this.o.source();
      if (!source) return why('this cluster access cannot be loaded by another process');
      const { file, args } = (this.o.command ?? selfCommand)();
      if (this.o.logFile) logFd = openSync(this.o.logFile, 'a', 0o600);
      const child = spawn(file, [...args, '__exit-watch', this.o.runId], { detached: true, stdio: ['pipe', 'ignore', logFd] });
      child.on('error', (e) => this.o.log.warn(`exit watch: ${messageOf(e)}`));
      // EPIPE when it is gone: nothing to do about it here, and the executor must not die of it
      child.stdin!.on('error', () => {});
      // the executor may end while it runs (that is the point): neither holds this process open
      child.unref();
      (child.stdin as unknown as { unref?: () => void }).unref?.();
      const start: ExitWatchStart = { kube: source, deadlineMs: EXIT_WATCH_DEADLINE_MS };
      child.stdin!.write(`${JSON.stringify(start)}\n`);
      this.child = child;
      return child;
    } catch (e) {
      return why(messageOf(e));
    } finally {
      if (typeof logFd === 'number') closeSync(logFd);
    }
  }
}

/**
 * This tool's CLI: the single executable itself, else bin/kube-runbook.js beside dist/ (this module is
 * dist/engine/exit-watch.js), run by the Node that runs this process.
 */
export function selfCommand(): { file: string; args: string[] } {
  if (isSea()) return { file: process.execPath, args: [] };
  const bin = fileURLToPath(new URL('../../bin/kube-runbook.js', import.meta.url));
  if (!existsSync(bin)) throw new Error(`${bin} is missing`);
  return { file: process.execPath, args: [bin] };
}
