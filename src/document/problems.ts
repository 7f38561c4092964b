import { EXIT, KrError } from '../core/errors.js';

/** A path into a YAML document: mapping keys and list indexes. */
export type DocPath = readonly (string | number)[];

/** One thing wrong with a file, at a 1-based line and column. `path` is empty for problems of the YAML text itself. */
export interface Problem {
  line: number;
  col: number;
  path: string;
  message: string;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** `spec.steps[2].with.timeout`; keys that are not plain words are bracketed: `labels["a.b/c"]`. */
export function pathText(path: DocPath): string {
  let text = '';
  for (const seg of path) {
    if (typeof seg === 'number') text += `[${seg}]`;
    else if (IDENT.test(seg)) text += text ? `.${seg}` : seg;
    else text += `[${JSON.stringify(seg)}]`;
  }
  return text;
}

/** `FILE:LINE:COL: PATH: message`, the one shape every problem is printed in. */
export function formatProblem(file: string, p: Problem): string {
  return `${file}:${p.line}:${p.col}: ${p.path ? `${p.path}: ` : ''}${p.message}`;
}

/** Sorted by position, identical problems once. */
export function sortProblems(problems: readonly Problem[]): Problem[] {
  const seen = new Set<string>();
  return [...problems]
    .sort((a, b) => a.line - b.line || a.col - b.col)
    .filter((p) => {
      const key = `${p.line}:${p.col}:${p.path}:${p.message}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

/** The error a loader throws: `<file>: N problems`, one detail line per problem. */
export function invalidFileError(
  code: 'RUNBOOK_INVALID' | 'INVENTORY_INVALID' | 'REPORT_INVALID',
  file: string,
  problems: readonly Problem[],
): KrError {
  const sorted = sortProblems(problems);
  const n = sorted.length;
  return new KrError(code, `${file}: ${n} ${n === 1 ? 'problem' : 'problems'}`, {
    exit: EXIT.invalid,
    details: sorted.map((p) => formatProblem(file, p)),
  });
}

/** What the checkers return: the loaded value, or every problem found. */
export type Checked<T> = { ok: true; value: T } | { ok: false; problems: Problem[] };
