import type { Command } from 'commander';
import type { ExitCode } from '../core/errors.js';

/** What a command reports back to main, the one place that sets the exit code. */
export type Done = (code: ExitCode, options?: { now?: boolean }) => void;

/** Each file in src/cli/ (but main and types) exports `register(program, done)`, adding one command. */
export type Register = (program: Command, done: Done) => void;

/** The headings of `kube-runbook --help`, in the order it shows them. */
export const GROUPS = ['Run', 'Author', 'Inspect', 'Operate', 'Develop'] as const;
export type Group = (typeof GROUPS)[number];

/** One example of `COMMAND --help`: the arguments after the program's name, and what they do. */
export type Example = readonly [args: string, what: string];

/**
 * How a command module's command shows in the help, next to its `register`: the group of `kube-runbook --help` it
 * is listed under, the examples of its own `--help`, and any text after them (`run`'s exit codes).
 */
export interface CommandHelp {
  group: Group;
  examples: readonly Example[];
  more?: () => string;
}
