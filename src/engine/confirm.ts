import { createInterface } from 'node:readline';
import type { Clock } from '../core/clock.js';

export type Answer = 'yes' | 'no' | 'timeout';

/** Answers confirm steps. */
export interface Confirmer {
  /** Whether someone can answer (a terminal, or --yes). */
  readonly answerable: boolean;
  ask(message: string, options: { timeoutMs: number; signal: AbortSignal; context?: () => string }): Promise<Answer>;
}

/** --yes: every confirmation is answered yes, and says so. */
export const assumeYes: Confirmer = { answerable: true, ask: async () => 'yes' };

/** Nobody to ask (no terminal, no --yes): preflight refuses runbooks with confirm steps. */
export const nobody: Confirmer = { answerable: false, ask: async () => 'no' };

/**
 * Asks on a terminal: prints the message (and the live context, e.g. the eviction forecast) and waits for y/n
 * until the timeout. Anything but y/yes is no.
 */
export function terminalConfirmer(input: NodeJS.ReadableStream, output: NodeJS.WritableStream, clock: Clock): Confirmer {
  return {
    answerable: true,
    ask(message, { timeoutMs, signal, context }) {
      return new Promise<Answer>((resolve) => {
        const rl = createInterface({ input, output, terminal: false });
        let settled = false;
        const finish = (a: Answer) => {
          if (settled) return;
          settled = true;
          cancel();
          signal.removeEventListener('abort', onAbort);
          rl.close();
          resolve(a);
        };
        const onAbort = () => finish('no');
        const cancel = clock.setTimer(timeoutMs, () => {
          output.write('\n(no answer in time)\n');
          finish('timeout');
        });
        signal.addEventListener('abort', onAbort, { once: true });
        const extra = context?.();
        output.write(`\n${extra ? `${extra}\n` : ''}? ${message} [y/N] `);
        rl.once('line', (line) => finish(/^\s*y(es)?\s*$/i.test(line) ? 'yes' : 'no'));
      });
    },
  };
}
