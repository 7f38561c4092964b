import type { z } from 'zod';
import { quote } from '../core/errors.js';
import { didYouMean } from './did-you-mean.js';
import { type DocPath, type Problem, pathText } from './problems.js';
import { objectShape, pickOption, resolve, schemaAt, type Schema, unionOptions } from './schema-walk.js';
import type { YamlSource } from './yaml-source.js';

type Issue = z.core.$ZodIssue;

/** zod's own default messages; anything else was written for a person and is kept. */
const DEFAULT_MESSAGE = /^(Invalid|Too (big|small)|Unrecognized key)/;

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'a mapping',
  record: 'a mapping',
  array: 'a list',
  tuple: 'a list',
  null: 'null',
};

function valueAt(root: unknown, path: DocPath): unknown {
  let v = root;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}

const got = (v: unknown) => ` (got ${Array.isArray(v) && v.length > 0 ? `a list: ${quote(v)}` : quote(v)})`;
const hint = (word: unknown, candidates: readonly string[]) => {
  const h = typeof word === 'string' ? didYouMean(word, candidates) : undefined;
  return h ? `; ${h}` : '';
};

/**
 * Turns zod issues for `value` (checked against `schema`) into positioned problems with messages a person
 * reads; `base` is where `value` sits in the document.
 */
export function zodProblems(schema: Schema, value: unknown, issues: readonly Issue[], base: DocPath, source: YamlSource): Problem[] {
  const out: Problem[] = [];
  const at = (path: DocPath, message: string, where: 'value' | 'key' = 'value') =>
    out.push(source.problem([...base, ...path], message, where));

  const visit = (issue: Issue, prefix: DocPath) => {
    const path = [...prefix, ...issue.path] as (string | number)[];
    const v = valueAt(value, path);
    const custom = !DEFAULT_MESSAGE.test(issue.message);
    switch (issue.code) {
      case 'invalid_union': {
        if (issue.errors.length === 0) {
          // a discriminated union whose key has no known value
          const known = 'options' in issue && issue.options ? issue.options.map(String) : [];
          const expected = `expected one of ${known.join(', ')}`;
          if (v === undefined) {
            const p = source.problem([...base, ...path], `missing required key ${JSON.stringify(path.at(-1))} (${expected})`);
            out.push({ ...p, path: pathText([...base, ...path.slice(0, -1)]) });
          } else at(path, `${known.length > 0 ? expected : 'matches more than one form'}${hint(v, known)}${got(v)}`);
          return;
        }
        const here = schemaAt(schema, value, path);
        const options = (here && unionOptions(here)) ?? [];
        const pick = options.length === issue.errors.length ? pickOption(options, v) : { index: bestBranch(issue.errors) };
        if ('index' in pick) for (const sub of issue.errors[pick.index] ?? []) visit(sub, path);
        else at(path, `${pick.message}${pick.suggestFor ? hint(pick.suggestFor.word, pick.suggestFor.candidates) : ''}${got(v)}`);
        return;
      }
      case 'unrecognized_keys': {
        const target = resolve(schemaAt(schema, value, path) ?? schema, v);
        const allowed = Object.keys((target && objectShape(target)) ?? {});
        for (const key of issue.keys) {
          const h = didYouMean(key, allowed);
          at([...path, key], `unknown key ${JSON.stringify(key)} (${h ?? `allowed: ${allowed.join(', ')}`})`, 'key');
        }
        return;
      }
      case 'invalid_type':
        if (v === undefined) {
          // placed at the key of the mapping it belongs in, and named from there
          const p = source.problem([...base, ...path], `missing required key ${JSON.stringify(path.at(-1))}`);
          out.push({ ...p, path: pathText([...base, ...path.slice(0, -1)]) });
          return;
        }
        at(path, `${custom ? issue.message : `expected ${TYPE_WORDS[issue.expected] ?? issue.expected}`}${got(v)}`);
        return;
      case 'invalid_value': {
        const values = issue.values.map(String);
        const expected = values.length === 1 ? `expected ${JSON.stringify(issue.values[0])}` : `expected one of ${values.join(', ')}`;
        at(path, `${custom ? issue.message : expected}${values.length > 1 ? hint(v, values) : ''}${got(v)}`);
        return;
      }
      case 'too_small':
      case 'too_big':
        at(path, `${custom ? issue.message : sizeMessage(issue)}${got(v)}`);
        return;
      case 'invalid_format':
        at(
          path,
          `${custom ? issue.message : issue.format === 'regex' ? `expected text matching ${issue.pattern}` : `expected a valid ${issue.format}`}${got(v)}`,
        );
        return;
      case 'not_multiple_of':
        at(path, `${custom ? issue.message : `expected a multiple of ${issue.divisor}`}${got(v)}`);
        return;
      case 'invalid_key':
      case 'invalid_element':
        for (const sub of issue.issues) visit(sub, issue.code === 'invalid_element' ? [...path, String(issue.key)] : path);
        return;
      case 'custom': {
        // an error inside an expression (CEL, PromQL) says where in it: `params.offset`
        const offset: unknown = issue.params?.offset;
        if (typeof offset === 'number') {
          const full = [...base, ...path];
          out.push({ ...source.locateIn(full, offset), path: pathText(full), message: issue.message });
        } else at(path, `${issue.message}${got(v)}`);
        return;
      }
      default:
        at(path, `${(issue as Issue).message}${got(v)}`);
    }
  };
  for (const issue of issues) visit(issue, []);
  return out;
}

/** Without a schema to read, the union branch that got furthest: the one with the fewest issues. */
function bestBranch(errors: readonly (readonly Issue[])[]): number {
  let best = 0;
  errors.forEach((e, i) => {
    if (e.length < errors[best]!.length) best = i;
  });
  return best;
}

function sizeMessage(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === 'too_small';
  const n = Number(small ? issue.minimum : issue.maximum);
  const inclusive = issue.inclusive !== false;
  switch (issue.origin) {
    case 'string':
      if (small && n === 1) return 'expected a non-empty string';
      return `expected ${small ? 'at least' : 'at most'} ${n} characters`;
    case 'array':
    case 'set':
      if (small && n === 1) return 'expected at least one item';
      return `expected ${small ? 'at least' : 'at most'} ${n} items`;
    default:
      return `expected a number ${small ? '>' : '<'}${inclusive ? '=' : ''} ${n}`;
  }
}
