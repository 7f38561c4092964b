import { KrError, quote } from '../core/errors.js';
import { shq } from '../core/shell.js';

/**
 * What a transport writes to `sh -s` on a node. The script is wrapped in one compound command so the shell
 * parses all of it before running any of it:
 *
 *     {
 *     printf %s '<input>' | {      (or `{` … `} </dev/null` without input)
 *     <script>
 *     }
 *     }
 *
 * - a command in the script that reads stdin reads `input` (or nothing), never the rest of the script;
 * - a transfer cut anywhere before the last `}` is a syntax error (unclosed group or quote): nothing runs;
 * - `input` travels single-quoted, so it reaches the script byte for byte, trailing newline or not.
 */
export function wireScript(script: string, input?: string): string {
  refuseNul('script', script);
  if (input === undefined) return `{\n{\n${script}\n} </dev/null\n}\n`;
  refuseNul('input', input);
  return `{\nprintf %s ${shq(input)} | {\n${script}\n}\n}\n`;
}

function refuseNul(what: string, text: string): void {
  const at = text.indexOf('\0');
  if (at >= 0)
    throw new KrError('EXEC_BAD_TEXT', `a ${what} cannot carry a NUL byte through a shell (at offset ${at}, got ${quote(text)})`, {
      exit: 2,
    });
}
