import { Environment } from '@marcbachmann/cel-js';
import { z } from 'zod';

/**
 * CEL conditions, through @marcbachmann/cel-js: a CEL implementation with no dependencies, released often (8.x,
 * 2026), with a type checker and errors that carry the source range. The alternatives were cel-js (a Chevrotain
 * parser, no checker, older) and @bufbuild/cel (needs protobuf and an RE2 port: heavy for one expression per
 * object). Kubernetes evaluates its own CEL (ValidatingAdmissionPolicy, CRD rules) with the same `object` variable,
 * so conditions read as they do there.
 */

const env = new Environment({ unlistedVariablesAreDyn: false }).registerVariable('object', 'map');

/** An error inside an expression: the message and the character it is about. */
export interface ExpressionError {
  message: string;
  offset: number;
}

interface CelError {
  summary?: string;
  message: string;
  range?: { start: number };
}

/** The type-checked condition's problem, if any: syntax, unknown names and functions, or a result that is not a bool. */
export function celProblem(expression: string): ExpressionError | undefined {
  let r: ReturnType<Environment['check']>;
  try {
    r = env.check(expression);
  } catch (e) {
    const err = e as CelError;
    return { message: `CEL: ${err.summary ?? err.message.split('\n')[0]}`, offset: err.range?.start ?? 0 };
  }
  if (!r.valid) {
    const err = r.error as CelError | undefined;
    return { message: `CEL: ${err?.summary ?? err?.message.split('\n')[0] ?? 'invalid'}`, offset: err?.range?.start ?? 0 };
  }
  if (r.type !== 'bool' && r.type !== 'dyn') return { message: `CEL: the condition must be true or false (it gives ${r.type})`, offset: 0 };
  return undefined;
}

/** A CEL condition param: checked when the runbook is validated, with the position of the error inside it. */
export const celCondition = () =>
  z.string().min(1).superRefine((s, ctx) => {
    const p = celProblem(s);
    if (p) ctx.addIssue({ code: 'custom', message: p.message, params: { offset: p.offset } });
  });

/** JSON as CEL sees it: whole numbers are CEL ints (as Kubernetes gives them), so `replicas - 1` is int arithmetic. */
function toCel(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(toCel);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  return v;
}

export type CelVerdict = { ok: boolean; error?: undefined } | { ok: false; error: string };

/** Compiles a condition once; evaluating it on an object never throws (an evaluation error is a false verdict). */
export function compileCondition(expression: string): (object: unknown) => CelVerdict {
  const run = env.parse(expression);
  return (object) => {
    try {
      const r: unknown = run({ object: toCel(object) });
      return r === true ? { ok: true } : r === false ? { ok: false } : { ok: false, error: `not true or false: ${String(r)}` };
    } catch (e) {
      const err = e as CelError;
      return { ok: false, error: err.summary ?? err.message.split('\n')[0] ?? String(e) };
    }
  };
}
