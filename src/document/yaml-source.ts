import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  visit,
  type Document,
  type Node,
  type Pair,
  type YAMLError,
} from 'yaml';
import { quote } from '../core/errors.js';
import { type DocPath, type Problem, pathText } from './problems.js';
import { scalarSourceOffset } from './scalar-offset.js';

/** What the document should be, for the messages about empty and non-mapping documents. */
export interface Expected {
  /** `a Runbook` */
  what: string;
  /** the top-level keys, in the order a person writes them */
  keys: readonly string[];
  /** The `kind` expected: a document of another of OTHER_KINDS is refused with one problem saying so. */
  kind?: string;
}

/** The kinds of document the tool reads: one given where another is expected gets one line, not its schema's errors. */
const KINDS = ['Runbook', 'Inventory'];
const withArticle = (kind: string) => `${/^[AEIOU]/.test(kind) ? 'an' : 'a'} ${kind}`;

/** A parsed YAML document that can say where any path in it is. */
export interface YamlSource {
  file: string;
  /** The document as plain data (what the schemas check). */
  value: unknown;
  /** Line and column of the value at `path` (`at: 'key'`: of its key). A path that is not in the document gives
   * the place of its deepest part that is: the key of the mapping a missing key belongs in. */
  locate(path: DocPath, at?: 'value' | 'key'): { line: number; col: number };
  /** `FILE:LINE:COL` of a path. */
  where(path: DocPath): string;
  problem(path: DocPath, message: string, at?: 'value' | 'key'): Problem;
  /** Line and column of character `offset` of the string value at `path` (an error inside an expression). */
  locateIn(path: DocPath, offset: number): { line: number; col: number };
}

export interface Parsed {
  /** Absent when nothing can be checked: not text, empty, not a mapping, or a YAML syntax error. */
  source?: YamlSource;
  problems: Problem[];
}

const at11 = (message: string): Problem => ({ line: 1, col: 1, path: '', message });

/** Text from file content; undefined for binary content (NUL bytes, invalid UTF-8). */
function decodeText(content: string | Uint8Array): string | undefined {
  let text: string;
  if (typeof content === 'string') text = content;
  else {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(content);
    } catch {
      return undefined;
    }
  }
  if (text.includes('\0')) return undefined;
  return text.startsWith('\uFEFF') ? text.slice(1) : text;
}

/** Parses one YAML document, reporting every problem of the text itself as a positioned Problem. */
export function parseYamlSource(content: string | Uint8Array, file: string, expected: Expected): Parsed {
  const text = decodeText(content);
  if (text === undefined) return { problems: [at11('not a text file')] };
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false, strict: true });
  const pos = (offset: number) => lines.linePos(offset);
  const duplicates = findDuplicateKeys(doc, pos);
  const problems: Problem[] = [];
  const syntax: Problem[] = [];
  for (const e of doc.errors) {
    if (e.code === 'DUPLICATE_KEY') problems.push(duplicates.get(e.pos[0]) ?? { ...pos(e.pos[0]), path: '', message: 'duplicate key' });
    else syntax.push(yamlProblem(e, text, doc, pos));
  }
  for (const w of doc.warnings) problems.push({ ...pos(w.pos[0]), path: '', message: `YAML: ${lowerFirst(w.message)}` });
  if (syntax.length > 0) return { problems: [...problems, ...rootCauses(syntax)] };

  const contents = doc.contents;
  if (contents === null || contents === undefined) return { problems: [at11(`the file is empty; expected ${expected.what}`)] };
  if (!isMap(contents)) {
    let got: string;
    try {
      const v: unknown = contents.toJSON();
      got = Array.isArray(v) ? 'a list' : v === null ? 'null' : quote(v);
    } catch {
      got = 'something else';
    }
    const where = pos(contents.range?.[0] ?? 0);
    return { problems: [{ ...where, path: '', message: `expected a mapping with ${expected.keys.join(', ')} (got ${got})` }] };
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    return { problems: [at11(`YAML: ${lowerFirst(e instanceof Error ? e.message : String(e))}`)] };
  }
  const kind = (value as { kind?: unknown }).kind;
  if (expected.kind && typeof kind === 'string' && kind !== expected.kind && KINDS.includes(kind))
    return { problems: [...problems, at11(`this is ${withArticle(kind)}; expected ${expected.what}`)] };
  const locate = (path: DocPath, atWhat: 'value' | 'key' = 'value') => pos(offsetOf(doc, path, atWhat));
  const source: YamlSource = {
    file,
    value,
    locate,
    where: (path) => {
      const p = locate(path);
      return `${file}:${p.line}:${p.col}`;
    },
    problem: (path, message, atWhat = 'value') => ({ ...locate(path, atWhat), path: pathText(path), message }),
    locateIn: (path, offset) => {
      const node = nodeAt(doc, path);
      return isScalar(node) ? pos(scalarSourceOffset(text, node, offset)) : locate(path);
    },
  };
  return { source, problems };
}

const MAX_SYNTAX_ERRORS = 5;

/**
 * A tab in the indentation upsets everything after it, so only the tabs are reported then; otherwise the first
 * syntax error of each line (the others on it follow from it), and of those the first few: after a syntax
 * error the parser guesses, and later errors are mostly its wrong guesses.
 */
function rootCauses(syntax: Problem[]): Problem[] {
  const tabs = syntax.filter((p) => p.message.startsWith('tab character'));
  const lines = new Set<number>();
  const causes = (tabs.length > 0 ? tabs : syntax)
    .sort((a, b) => a.line - b.line || a.col - b.col)
    .filter((p) => !lines.has(p.line) && lines.add(p.line));
  if (causes.length <= MAX_SYNTAX_ERRORS) return causes;
  const rest = causes.length - MAX_SYNTAX_ERRORS;
  const next = causes[MAX_SYNTAX_ERRORS]!;
  return [
    ...causes.slice(0, MAX_SYNTAX_ERRORS),
    {
      line: next.line,
      col: next.col,
      path: '',
      message: `${rest} more YAML syntax ${rest === 1 ? 'error' : 'errors'} from here on, likely caused by the ones above`,
    },
  ];
}

function yamlProblem(e: YAMLError, text: string, doc: Document, pos: (offset: number) => { line: number; col: number }): Problem {
  const where = pos(e.pos[0]);
  if (e.code === 'MISSING_CHAR' && /quote/.test(e.message)) {
    // reported where the text ran out; the opening quote is what a person looks for
    const start = quotedStart(doc, e.pos[0]);
    if (start !== undefined) return { ...pos(start), path: '', message: 'YAML syntax error: this quoted text has no closing quote' };
  }
  const lineText = text.split(/\r?\n/)[where.line - 1] ?? '';
  const indent = /^[ \t]*/.exec(lineText)?.[0] ?? '';
  if (e.code === 'TAB_AS_INDENT' || indent.includes('\t'))
    return {
      line: where.line,
      col: indent.includes('\t') ? indent.indexOf('\t') + 1 : where.col,
      path: '',
      message: 'tab character used for indentation (YAML allows only spaces)',
    };
  if (e.code === 'MULTIPLE_DOCS') return { ...where, path: '', message: 'a second YAML document starts here; a file holds exactly one' };
  if (e.code === 'BLOCK_AS_IMPLICIT_KEY' || e.code === 'MULTILINE_IMPLICIT_KEY') {
    const deeper = overIndentedKey(text.split(/\r?\n/), where.line);
    if (deeper) return deeper;
  }
  const indented = indent.length > 0 && (e.code === 'BAD_INDENT' || e.code === 'BLOCK_AS_IMPLICIT_KEY');
  const indentHint = indented ? ' (check the indentation of this line)' : '';
  // at the line's first character, not at its column 1, where the parser may put it
  const col = indented && where.col <= indent.length ? indent.length + 1 : where.col;
  return { line: where.line, col, path: '', message: `YAML syntax error: ${lowerFirst(e.message)}${indentHint}` };
}

/**
 * A key indented deeper than the key on the line before it (`- name: x` then `    action: y`): the parser reads the
 * two as one multi-line key at the first line, but the line to fix is the second. Reported there, at its key.
 */
function overIndentedKey(lines: string[], line: number): Problem | undefined {
  const owner = /^(\s*(?:-\s+)*)([^\s#:][^:#]*?)\s*:(?:\s|$)/.exec(lines[line - 1] ?? '');
  if (!owner) return undefined;
  const ownerCol = owner[1]!.length;
  for (let i = line; i < lines.length; i++) {
    const text = lines[i]!;
    if (/^\s*(#.*)?$/.test(text)) continue;
    const key = /^(\s*)([^\s#:-][^:#]*?)\s*:(?:\s|$)/.exec(text);
    if (!key || key[1]!.length <= ownerCol) return undefined;
    return {
      line: i + 1,
      col: key[1]!.length + 1,
      path: '',
      message: `YAML syntax error: ${JSON.stringify(key[2])} is indented deeper than ${JSON.stringify(owner[2])} on the line before (column ${key[1]!.length + 1}, not ${ownerCol + 1}): keys of one mapping start at the same column`,
    };
  }
  return undefined;
}

/** Start of the quoted scalar that ends at `offset`. */
function quotedStart(doc: Document, offset: number): number | undefined {
  let start: number | undefined;
  visit(doc, {
    Scalar(_key, node) {
      const r = node.range;
      if (r && r[0] < offset && offset <= r[1] && (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE')) start = r[0];
    },
  });
  return start;
}

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

function keyText(key: unknown): string {
  if (isScalar(key)) return String(key.value);
  if (key && typeof key === 'object' && 'toJSON' in key && typeof key.toJSON === 'function') return JSON.stringify(key.toJSON());
  return String(key);
}

/** Duplicate keys by the offset of the second occurrence, with their path and the first one's place. */
function findDuplicateKeys(doc: Document, pos: (offset: number) => { line: number; col: number }): Map<number, Problem> {
  const found = new Map<number, Problem>();
  const visit = (node: unknown, path: (string | number)[]) => {
    if (isMap(node)) {
      const seen = new Map<string, Pair>();
      for (const pair of node.items) {
        const k = keyText(pair.key);
        const first = seen.get(k);
        const offset = (pair.key as Node | null)?.range?.[0];
        if (first && offset !== undefined) {
          const f = pos((first.key as Node | null)?.range?.[0] ?? 0);
          found.set(offset, {
            ...pos(offset),
            path: pathText([...path, k]),
            message: `duplicate key ${JSON.stringify(k)} (first at ${f.line}:${f.col})`,
          });
        } else seen.set(k, pair);
        visit(pair.value, [...path, k]);
      }
    } else if (isSeq(node)) node.items.forEach((item, i) => visit(item, [...path, i]));
  };
  visit(doc.contents, []);
  return found;
}

/** Offset of the deepest node of `path` found in the document (see YamlSource.locate). */
/** The node at `path`, or undefined when the path is not in the document. */
function nodeAt(doc: Document, path: DocPath): unknown {
  let node: unknown = doc.contents;
  for (const seg of path) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) node = node.items.find((item) => keyText(item.key) === String(seg))?.value;
    else if (isSeq(node) && typeof seg === 'number') node = node.items[seg];
    else return undefined;
  }
  return isAlias(node) ? node.resolve(doc) : node;
}

function offsetOf(doc: Document, path: DocPath, atWhat: 'value' | 'key'): number {
  let node: unknown = doc.contents;
  let pair: Pair | undefined;
  let found = 0;
  for (const seg of path) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const p = node.items.find((item) => keyText(item.key) === String(seg));
      if (!p) break;
      pair = p;
      node = p.value;
    } else if (isSeq(node) && typeof seg === 'number' && seg < node.items.length) {
      pair = undefined;
      node = node.items[seg];
    } else break;
    found++;
  }
  const keyOffset = (pair?.key as Node | null | undefined)?.range?.[0];
  const valueOffset = (node as Node | null | undefined)?.range?.[0];
  if (found < path.length || atWhat === 'key') return keyOffset ?? valueOffset ?? 0;
  return valueOffset ?? keyOffset ?? 0;
}
