/**
 * Errors with stable codes. Every error the tool reports on purpose is a KrError; its `exit` says which
 * exit code it leads to, and only `src/cli/main.ts` turns that into `process.exitCode`.
 */
export const EXIT = {
  ok: 0,
  failed: 1,
  invalid: 2,
  refused: 3,
  rollbackIncomplete: 4,
  objectiveMissed: 5,
  interrupted: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** What each exit code means, as `run --help` lists them. */
export const EXIT_MEANING: { readonly [K in keyof typeof EXIT]: string } = {
  ok: 'passed: every step passed, everything reverted',
  failed:
    'failed, aborted or halted (a step failed, a guard aborted, a confirmation was declined, `kube-runbook halt`), everything reverted',
  invalid: 'invalid input or usage (bad runbook or inventory, unknown command or flag)',
  refused: 'preflight refused (a halt is set, another run holds the lock, …): nothing was applied',
  rollbackIncomplete: 'rollback incomplete: something may remain; the output says how to remove it, and the recover command',
  objectiveMissed: 'a recovery objective was missed: everything passed and was reverted, but the cluster recovered too slowly',
  interrupted: 'interrupted (Ctrl-C, SIGTERM, SIGHUP), everything reverted',
};

export interface KrErrorOptions {
  exit?: ExitCode;
  cause?: unknown;
  /** Extra lines printed under the message (e.g. one per validation problem). */
  details?: string[];
  /**
   * Set by the transport that threw when trying again can help (the connection, not the script, failed): a count
   * noun naming the failure, as reports say it ("reverted on attempt 3 after 2 connection resets").
   */
  transient?: string;
}

export class KrError extends Error {
  readonly code: string;
  readonly exit: ExitCode;
  readonly details: string[];
  readonly transient: string | undefined;

  constructor(code: string, message: string, options: KrErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'KrError';
    this.code = code;
    this.exit = options.exit ?? EXIT.failed;
    this.details = options.details ?? [];
    this.transient = options.transient;
  }
}

export function isKrError(e: unknown): e is KrError {
  return e instanceof KrError;
}

/** Shortens any value for quoting in an error message: `(got VALUE)`. */
export function quote(value: unknown, max = 60): string {
  let text: string;
  if (typeof value === 'string') text = JSON.stringify(value);
  else if (value === undefined) text = 'nothing';
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The message of anything thrown, without a stack. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
