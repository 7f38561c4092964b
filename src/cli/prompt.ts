import { createInterface } from 'node:readline';
import { EXIT, KrError } from '../core/errors.js';

/** Questions on a terminal. Ctrl-C and Ctrl-D end the command (KrError INTERRUPTED, exit 130); nothing is written. */
export interface Prompter {
  /**
   * Asks QUESTION until PARSE accepts the answer (it returns the value, or an Error whose message is shown before
   * asking again); an empty answer is FALLBACK when there is one.
   */
  ask<T>(question: string, o: { fallback?: string; parse: (answer: string) => T | Error }): Promise<T>;
  /** Says something between questions. */
  say(text: string): void;
  close(): void;
}

function interrupted(how: string): KrError {
  return new KrError('INTERRUPTED', `${how} at a question: nothing was written`, { exit: EXIT.interrupted });
}

/** A Prompter on INPUT (a terminal) with questions and answers on OUTPUT. */
export function terminalPrompter(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Prompter {
  const rl = createInterface({ input, output, terminal: true });
  let pending: ((e: KrError) => void) | undefined;
  let closing = false;
  const fail = (e: KrError) => {
    output.write('\n');
    const reject = pending;
    pending = undefined;
    closing = true;
    rl.close();
    reject?.(e);
  };
  rl.on('SIGINT', () => fail(interrupted('interrupted (Ctrl-C)')));
  rl.on('close', () => {
    if (!closing) fail(interrupted('input ended (Ctrl-D)'));
  });
  const line = (question: string) =>
    new Promise<string>((resolve, reject) => {
      if (closing) return reject(interrupted('input ended (Ctrl-D)'));
      pending = reject;
      rl.question(question, (answer) => {
        pending = undefined;
        resolve(answer.trim());
      });
    });
  return {
    async ask(question, o) {
      for (;;) {
        const answer = (await line(`${question}${o.fallback !== undefined ? ` [${o.fallback}]` : ''}: `)) || o.fallback || '';
        const v = o.parse(answer);
        if (!(v instanceof Error)) return v;
        output.write(`  ${v.message}\n`);
      }
    },
    say: (text) => output.write(`${text}\n`),
    close() {
      closing = true;
      rl.close();
    },
  };
}
