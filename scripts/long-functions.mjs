#!/usr/bin/env node
// Fails when a function, method or arrow function of src/ or packages/lab/src (tests aside) is longer than LIMIT
// lines, naming each with its file, line and length: a long function is split into named steps. `--all N` lists every
// function of at least N lines instead, longest first, and never fails.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const LIMIT = 120;
const ROOTS = ['src', 'packages/lab/src'];
/**
 * Functions let through up to the length given, each with why; one that grows past it fails, one that shrinks to the
 * limit is named so that its entry goes.
 */
const KNOWN = new Map([
  // none today: an entry is `['<file> <function>', <lines>]`
]);

const listSources = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return listSources(path);
    return /\.ts$/.test(entry.name) && !/\.(test|d)\.ts$/.test(entry.name) ? [path] : [];
  });

const nameOf = (node) => {
  if (node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText();
  }
  if (ts.isCallExpression(parent)) return `(argument of ${parent.expression.getText().slice(0, 40)})`;
  return '(anonymous)';
};

/** Every function with a body in the file: where it starts (its doc comment aside) and how many lines it spans. */
const measure = (file) => {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file: file.split('\\').join('/'), line: start + 1, lines: end - start + 1, name: nameOf(node) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
};

const functions = ROOTS.flatMap(listSources)
  .flatMap(measure)
  .sort((a, b) => b.lines - a.lines);
const where = (fn) => `${fn.file}:${fn.line} ${fn.name}: ${fn.lines} lines`;

if (process.argv[2] === '--all') {
  const least = Number(process.argv[3] ?? 60);
  for (const fn of functions.filter((f) => f.lines >= least)) console.log(where(fn));
} else {
  const known = (fn) => KNOWN.get(`${fn.file} ${fn.name}`);
  const tooLong = functions.filter((fn) => fn.lines > (known(fn) ?? LIMIT));
  for (const fn of tooLong) console.error(`${where(fn)} (at most ${known(fn) ?? LIMIT})`);
  for (const fn of functions.filter((f) => known(f) !== undefined && f.lines <= LIMIT))
    console.error(`note: ${where(fn)}: within ${LIMIT} now, its entry in KNOWN (scripts/long-functions.mjs) can go`);
  if (tooLong.length) {
    console.error(`${tooLong.length} function(s) longer than allowed: split each into named steps`);
    process.exit(1);
  }
  console.log(`no function over ${LIMIT} lines (${functions.length} functions, ${KNOWN.size} known exception(s))`);
}
