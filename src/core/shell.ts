/**
 * Quoting for POSIX sh (dash included). Every value that comes from a runbook, an inventory or the cluster and
 * ends up in a script goes through `shq`; scripts are sent on stdin, never spliced into a command line.
 */
export function shq(value: string | number): string {
  const s = String(value);
  if (s.includes('\0')) throw new Error('a NUL byte cannot be passed to a shell');
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(s)) return s;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Joins words into one command line, each word quoted. */
export function shCommand(...words: (string | number)[]): string {
  return words.map(shq).join(' ');
}
