import { CommanderError } from 'commander';
import { EXIT, type ExitCode, isKrError, messageOf } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { out } from './output.js';

/**
 * The exit code of a command line whose parse threw `e`, after saying why on stderr, each line from `name`:
 * commander's own ends (help and version 0, a usage error it has printed already 2), a KrError in its own words
 * with its code, anything else as unexpected (its stack only with KUBE_RUNBOOK_DEBUG set).
 */
export function exitCodeOfThrown(name: string, e: unknown): ExitCode {
  if (e instanceof CommanderError) {
    if (e.exitCode === 0 || e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return EXIT.ok;
    return EXIT.invalid;
  }
  if (isKrError(e)) {
    out.stderr(`${name}: ${redactText(e.message)}${e.code ? ` [${e.code}]` : ''}`);
    for (const d of e.details) out.stderr(redactText(d));
    return e.exit;
  }
  out.stderr(`${name}: unexpected error: ${redactText(messageOf(e))}`);
  if (process.env.KUBE_RUNBOOK_DEBUG && e instanceof Error && e.stack) out.stderr(redactText(e.stack));
  return EXIT.failed;
}
