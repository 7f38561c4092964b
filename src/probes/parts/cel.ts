import { Environment, type ASTNode, type ParseResult } from '@marcbachmann/cel-js';
import { compilePattern, patternProblem, type Pattern } from '../../core/pattern.js';
import { expressionParam, type ExpressionError } from './expression.js';

/**
 * CEL conditions, through @marcbachmann/cel-js: a CEL implementation with no dependencies, released often (8.x,
 * 2026), with a type checker and errors that carry the source range. The alternatives were cel-js (a Chevrotain
 * parser, no checker, older) and @bufbuild/cel (needs protobuf and an RE2 port: heavy for one expression per
 * object). Kubernetes evaluates its own CEL (ValidatingAdmissionPolicy, CRD rules) with the same `object` variable,
 * so conditions read as they do there.
 *
 * Two things the library does not do, and Kubernetes does, are added here:
 * - `matches()` runs on RE2 (src/core/pattern.ts, linear time) instead of JavaScript's backtracking RegExp. The
 *   library will not let a built-in function be registered again, so each `matches` call is pointed at
 *   `re2_matches` (same signature) after parsing, before the type check; a literal pattern is compiled then, so a
 *   bad one is a validate error at its position.
 * - A cost limit, as Kubernetes' per-expression limit: every node the evaluator runs costs 1, and a result adds
 *   its size (a list 1 per element, a string 1 per 10 characters, the text `matches` reads likewise). The library
 *   has no hook for this; every evaluation step goes through its evaluator's `run`, which is wrapped once, and
 *   counts only while a condition of ours is being evaluated. Tests below pin both, so a library upgrade that
 *   changes them fails there. `validate` refuses a condition whose cost, counting its literal lists at their size
 *   and every list read from the object as one element, is already over the limit.
 */

/** The most a condition may cost on one object (Kubernetes allows its CEL one million per call). */
export const CEL_COST_LIMIT = 1_000_000;

const RE2_MATCHES = 're2_matches';
const PATTERN_CACHE = 64;
const patterns = new Map<string, Pattern>();

/** A pattern compiled once and kept (the most recent few, for patterns that come from the object). */
function pattern(source: string): Pattern {
  let p = patterns.get(source);
  if (!p) {
    p = compilePattern(source);
    if (patterns.size >= PATTERN_CACHE) patterns.delete(patterns.keys().next().value!);
    patterns.set(source, p);
  }
  return p;
}

interface Meter {
  left: number;
}
/** The meter of the condition being evaluated; evaluation is synchronous, so one at a time. */
let meter: Meter | undefined;

const charge = (units: number) => {
  if (meter && (meter.left -= units) < 0) throw new CostExceeded();
};

class CostExceeded extends Error {
  constructor() {
    super(`the condition costs more than the limit of ${CEL_COST_LIMIT.toLocaleString('en')}`);
  }
}

function sizeOf(v: unknown): number {
  if (typeof v === 'string') return Math.floor(v.length / 10);
  if (Array.isArray(v)) return v.length;
  return 0;
}

const env = new Environment({ unlistedVariablesAreDyn: false })
  .registerVariable('object', 'map')
  .registerFunction(`string.${RE2_MATCHES}(string): bool`, (text: string, source: string) => {
    charge(sizeOf(text) + sizeOf(source));
    return pattern(source).test(text);
  });

type Run = (ast: unknown, ctx: unknown) => unknown;
/** Wraps the evaluator's `run` (reached through a function's `this`, in an environment of its own) to meter it. */
function meterEvaluator(): void {
  let proto: { run: Run } | undefined;
  new Environment()
    .registerFunction('evaluator(): bool', function (this: object) {
      proto = Object.getPrototypeOf(this) as { run: Run };
      return true;
    })
    .evaluate('evaluator()');
  if (!proto || typeof proto.run !== 'function') throw new Error('@marcbachmann/cel-js: the evaluator has no run() to meter');
  const run = proto.run;
  proto.run = function (this: unknown, ast: unknown, ctx: unknown) {
    if (!meter) return run.call(this, ast, ctx);
    charge(1);
    const r = run.call(this, ast, ctx);
    charge(sizeOf(r));
    return r;
  };
}
meterEvaluator();

interface CelError {
  summary?: string;
  message: string;
  range?: { start: number };
}

type Node = { op: string; args: unknown; start: number };
const isNode = (x: unknown): x is Node => !!x && typeof x === 'object' && 'op' in x && 'args' in x;

function children(n: Node): Node[] {
  if (n.op === 'value' || n.op === 'id') return [];
  const out: Node[] = [];
  const walk = (x: unknown) => {
    if (isNode(x)) out.push(x);
    else if (Array.isArray(x)) x.forEach(walk);
  };
  walk(n.args);
  return out;
}

const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

/** Cost of a node with literal lists at their size and every other list of one element (see the top). */
function estimate(n: Node): number {
  if (n.op === 'rcall') {
    const [name, receiver, args] = n.args as [string, Node, Node[]];
    if (COMPREHENSIONS.has(name) && args.length >= 2) {
      const size = receiver.op === 'list' || receiver.op === 'map' ? (receiver.args as unknown[]).length : 1;
      return 1 + estimate(receiver) + size * args.slice(1).reduce((s, a) => s + estimate(a), 1);
    }
  }
  return children(n).reduce((s, c) => s + estimate(c), 1);
}

/** Points `matches` at RE2 and checks literal patterns. */
function useRe2(n: Node): ExpressionError | undefined {
  if (n.op === 'rcall') {
    const args = n.args as [string, Node, Node[]];
    if (args[0] === 'matches' && args[2].length === 1) {
      args[0] = RE2_MATCHES;
      const p = args[2][0]!;
      const problem = p.op === 'value' && typeof p.args === 'string' ? patternProblem(p.args) : undefined;
      if (problem) return { message: `CEL: matches(): ${problem}`, offset: p.start };
    }
  }
  for (const c of children(n)) {
    const e = useRe2(c);
    if (e) return e;
  }
  return undefined;
}

const said = (e: unknown) => {
  const err = e as CelError | undefined;
  return (err?.summary ?? err?.message.split('\n')[0] ?? 'invalid').replaceAll(RE2_MATCHES, 'matches');
};

type Prepared = { run: ParseResult; problem?: undefined } | { run?: undefined; problem: ExpressionError };

/** Parsed, pointed at RE2, type-checked and its cost estimated. */
function prepare(expression: string): Prepared {
  let run: ParseResult;
  try {
    run = env.parse(expression);
  } catch (e) {
    return { problem: { message: `CEL: ${said(e)}`, offset: (e as CelError).range?.start ?? 0 } };
  }
  const root = run.ast as ASTNode & Node;
  const re2 = useRe2(root);
  if (re2) return { problem: re2 };
  const r = run.check();
  if (!r.valid) return { problem: { message: `CEL: ${said(r.error)}`, offset: (r.error as CelError | undefined)?.range?.start ?? 0 } };
  if (r.type !== 'bool' && r.type !== 'dyn')
    return { problem: { message: `CEL: the condition must be true or false (it gives ${r.type})`, offset: 0 } };
  const cost = estimate(root);
  if (cost > CEL_COST_LIMIT)
    return {
      problem: {
        message: `CEL: the condition would cost at least ${cost.toLocaleString('en')}, more than the limit of ${CEL_COST_LIMIT.toLocaleString('en')} (nested loops over large lists)`,
        offset: 0,
      },
    };
  return { run };
}

/** The condition's problem, if any: syntax, unknown names and functions, a result that is not a bool, a bad pattern, its cost. */
export function celProblem(expression: string): ExpressionError | undefined {
  return prepare(expression).problem;
}

/** A CEL condition param: checked when the runbook is validated, with the position of the error inside it. */
export const celCondition = () => expressionParam(celProblem);

/** JSON as CEL sees it: whole numbers are CEL ints (as Kubernetes gives them), so `replicas - 1` is int arithmetic. */
function toCel(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(toCel);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  return v;
}

export type CelVerdict = { ok: boolean; error?: undefined } | { ok: false; error: string };

/** What several evaluations may cost together (a judgement over many objects); each takes off what it cost. */
export interface CelBudget {
  left: number;
}

/**
 * Compiles a condition once; evaluating it on an object never throws (an evaluation error is a false verdict) and
 * stops once it has cost CEL_COST_LIMIT. What it cost is taken off `budget`, when given.
 */
export function compileCondition(expression: string): (object: unknown, budget?: CelBudget) => CelVerdict {
  const p = prepare(expression);
  if (p.problem) throw new Error(p.problem.message);
  const run = p.run;
  return (object, budget) => {
    const m: Meter = { left: CEL_COST_LIMIT };
    const input = { object: toCel(object) };
    meter = m;
    try {
      const r: unknown = run(input);
      if (m.left < 0) return { ok: false, error: new CostExceeded().message };
      return r === true ? { ok: true } : r === false ? { ok: false } : { ok: false, error: `not true or false: ${String(r)}` };
    } catch (e) {
      return { ok: false, error: m.left < 0 ? new CostExceeded().message : said(e) };
    } finally {
      meter = undefined;
      if (budget) budget.left -= CEL_COST_LIMIT - Math.max(m.left, 0);
    }
  };
}
