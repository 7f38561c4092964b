import type { Command } from 'commander';
import { EXIT, EXIT_MEANING } from '../core/errors.js';
import { RUN_STATUS } from '../engine/events.js';
import { columns } from './columns.js';
import type { Example } from './types.js';

/** The Examples section of a command's `--help`, as kubectl's: a comment line, then the command line. */
export function examplesText(program: string, examples: readonly Example[]): string {
  if (!examples.length) return '';
  return `\nExamples:\n${examples.map(([args, what]) => `  # ${what}\n  ${program} ${args}`).join('\n\n')}\n`;
}

/** The exit codes of `run`, from the one table of them (EXIT) and the run outcomes that lead to each (RUN_STATUS). */
export function exitCodesText(): string {
  const rows = (Object.keys(EXIT) as (keyof typeof EXIT)[]).map((key) => {
    const code = EXIT[key];
    const statuses = Object.entries(RUN_STATUS)
      .filter(([, c]) => c === code)
      .map(([s]) => s);
    return [`  ${code}`, `${EXIT_MEANING[key]}${statuses.length ? ` [status: ${statuses.join(', ')}]` : ''}`];
  });
  return `\nExit codes:\n${columns(rows)}\n`;
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
