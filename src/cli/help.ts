import type { Command } from 'commander';
import { EXIT, EXIT_MEANING } from '../core/errors.js';
import { RUN_STATUS } from '../engine/events.js';
import type { Example } from './types.js';
import { terminalWidth, wrap } from './wrap.js';

/** The Examples section of a command's `--help`, as kubectl's: a comment, then the command line. */
export function examplesText(program: string, examples: readonly Example[], width = terminalWidth()): string {
  if (!examples.length) return '';
  const one = ([args, what]: Example) => [...wrap(what, width, '  # '), `  ${program} ${args}`].join('\n');
  return `\nExamples:\n${examples.map(one).join('\n\n')}\n`;
}

/** The exit codes of `run`, from the one table of them (EXIT) and the run outcomes that lead to each (RUN_STATUS). */
export function exitCodesText(width = terminalWidth()): string {
  const lines = (Object.keys(EXIT) as (keyof typeof EXIT)[]).flatMap((key) => {
    const code = EXIT[key];
    const statuses = Object.entries(RUN_STATUS)
      .filter(([, c]) => c === code)
      .map(([s]) => s);
    return wrap(
      `${EXIT_MEANING[key]}${statuses.length ? ` [status: ${statuses.join(', ')}]` : ''}`,
      width,
      ' '.repeat(7),
      `  ${code}`.padEnd(7),
    );
  });
  return `\nExit codes:\n${lines.join('\n')}\n`;
}

/**
 * A usage error as one line, from what commander says ("error: unknown option '--dryrun'\n(Did you mean
 * --dry-run?)"): `kube-runbook: unknown option '--dryrun' (did you mean --dry-run?)`. The hint to `--help` follows it
 * (each command's showHelpAfterError).
 */
export function usageLine(message: string): string {
  const one = message
    .trim()
    .replace(/^error: /, '')
    .replace(/\s*\n\(Did you mean (.*)\)$/, ' (did you mean $1)')
    .replace(/\s*\n\s*/g, ' ');
  return `kube-runbook: ${one}\n`;
}

/** `kube-runbook agent manifests`: the words that name COMMAND on a command line. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}
