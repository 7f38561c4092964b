import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { shq } from '../core/shell.js';

/**
 * Values that would run `touch <marker>` (or worse) if they ever reached a shell unquoted, plus quoting
 * corner cases that must come back byte for byte. Shared by the transport tests, local and over ssh.
 */
export function hostileValues(marker: string): string[] {
  return [
    `$(touch ${marker})`,
    `\`touch ${marker}\``,
    `'; touch ${marker}; '`,
    `"; touch ${marker}; "`,
    `'"'"'; touch ${marker} #`,
    `; touch ${marker}`,
    `&& touch ${marker}`,
    `|| touch ${marker}`,
    `| touch ${marker}`,
    `\ntouch ${marker}\n`,
    `x\n}\ntouch ${marker}\n{`,
    `$(touch ${marker})\n'"\`;&&|*?[a-z]{x,y}~$HOME\\`,
    '*',
    '?',
    '[a-z]*',
    '/*',
    '~root',
    '{a,b}',
    '-n',
    '-e',
    '--',
    '-',
    '%s%n%d',
    '\\c\\n\\t\\0',
    '\\',
    "'",
    '"',
    "''",
    '""',
    "it's",
    'a\'b"c`d$e\\f',
    '$HOME',
    '${PATH}',
    '$((1+1))',
    '$IFS',
    '$$',
    '$?',
    '!',
    '  leading and trailing  ',
    '\ttab\tseparated\t',
    'cr\r\nlf',
    '\n\n',
    'a=b',
    '#not a comment',
    'ünïcødé ✓ 日本語',
    "KR_END\nEOF\n'EOF'",
    '',
  ];
}

export function markerPath(): string {
  return join(tmpdir(), `krt-marker-${randomBytes(6).toString('hex')}`);
}

/** A script that prints each value as an argument, through "$@" and through a variable, and what it must print. */
export function echoScript(values: string[]): { script: string; expected: string } {
  const quoted = values.map(shq).join(' ');
  const script = [
    `printf '[%s]\\n' ${quoted}`,
    `set -- ${quoted}`,
    `for a in "$@"; do printf '(%s)\\n' "$a"; done`,
    ...values.map((v) => `v=${shq(v)}; printf '<%s>\\n' "$v"`),
  ].join('\n');
  const expected = values.map((v) => `[${v}]\n`).join('') + values.map((v) => `(${v})\n`).join('') + values.map((v) => `<${v}>\n`).join('');
  return { script, expected };
}

export const markerExists = (marker: string) => existsSync(marker);
