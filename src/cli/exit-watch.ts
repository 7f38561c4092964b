import { realClock } from '../core/clock.js';
import { EXIT } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { redactText } from '../core/redact.js';
import { runExitWatcher } from '../engine/exit-watcher.js';
import { createKubeAccess } from '../kube/client.js';
import type { CommandHelp, Register } from './types.js';

/**
 * `__exit-watch RUN`: the exit watcher a run starts for itself (src/engine/exit-watch.ts), not a command for people.
 * Its stdin is the run's pipe; what it does goes to its stderr, the run's `<journal>.exit-watch.log`.
 */
export const register: Register = (program, done) => {
  program
    .command('__exit-watch', { hidden: true })
    .description("delete what a run's faults made in the cluster when the run's process ends before their revert")
    .argument('<run>', 'the run it watches (for the log, and for ps)')
    .helpOption(false)
    .action(async (run: string) => {
      const log = createLogger((level, msg) =>
        process.stderr.write(`${new Date(realClock.now()).toISOString()} ${level} ${run}: ${redactText(msg)}\n`),
      );
      const left = await runExitWatcher(process.stdin, {
        clock: realClock,
        log,
        connect: (source) => createKubeAccess({ ...source, clock: realClock, log }),
      });
      done(left.length ? EXIT.failed : EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Operate',
  examples: [],
};
