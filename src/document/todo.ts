import { type DocPath, type Problem, pathText } from './problems.js';
import type { YamlSource } from './yaml-source.js';

/**
 * A value left to fill in: a string that starts with `TODO:` (what `kube-runbook init` writes where it could not
 * find a value). A document holding one is never valid, whatever the schema says of the string, so a TODO can
 * never be run by accident.
 */
const TODO_PREFIX = 'TODO:';

const isTodo = (v: unknown): v is string => typeof v === 'string' && v.startsWith(TODO_PREFIX);

function todoPaths(v: unknown, path: DocPath, into: DocPath[]): DocPath[] {
  if (isTodo(v)) into.push(path);
  else if (Array.isArray(v)) v.forEach((x, i) => todoPaths(x, [...path, i], into));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) todoPaths(x, [...path, k], into);
  return into;
}

/**
 * PROBLEMS with one more for each TODO in the document, and without the schema's problems at or under a TODO's
 * path (the TODO says what is wrong there more plainly).
 */
export function withTodoProblems(source: YamlSource, problems: readonly Problem[]): Problem[] {
  const paths = todoPaths(source.value, [], []);
  if (!paths.length) return [...problems];
  const texts = paths.map(pathText);
  const under = (p: string) => texts.some((t) => p === t || p.startsWith(`${t}.`) || p.startsWith(`${t}[`));
  const todos = paths.map((path) => {
    const what = (source.value && valueAt(source.value, path)) as string;
    return source.problem(path, `left to fill in: ${what.slice(TODO_PREFIX.length).trim()} (nothing runs while a TODO is left)`);
  });
  return [...problems.filter((p) => !under(p.path)), ...todos];
}

function valueAt(v: unknown, path: DocPath): unknown {
  let x = v;
  for (const seg of path) x = (x as Record<string | number, unknown>)[seg];
  return x;
}
