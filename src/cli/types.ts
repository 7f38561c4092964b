import type { Command } from 'commander';
import type { ExitCode } from '../core/errors.js';

/** What a command reports back to main, the one place that sets the exit code. */
export type Done = (code: ExitCode, options?: { now?: boolean }) => void;

/** Each file in src/cli/ (but main and types) exports `register(program, done)`, adding one command. */
export type Register = (program: Command, done: Done) => void;
