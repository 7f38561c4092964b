import { createLogger, type Logger } from '../core/logger.js';

/** Output streams of the CLI, in one place so tests can capture them. */
const open = { stdout: true, stderr: true };

export const out = {
  stdout: (text: string) => open.stdout && process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
  stderr: (text: string) => open.stderr && process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
};

/**
 * A reader that goes away (`kube-runbook schema | head -1`) closes the pipe: from then on what is written there
 * is dropped, quietly, and the command ends as it would have (a run still rolls back), instead of dying on EPIPE.
 */
export function dropOutputOnClosedPipes(): void {
  for (const name of ['stdout', 'stderr'] as const)
    process[name].on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
      open[name] = false;
    });
}

/** Logs go to stderr as plain lines (secrets already redacted by the logger). */
export function stderrLogger(verbose: boolean): Logger {
  return createLogger((level, msg) => process.stderr.write(`${level === 'info' ? '' : `${level}: `}${msg}\n`), verbose ? 'debug' : 'warn');
}
