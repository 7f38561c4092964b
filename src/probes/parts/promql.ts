import { parser } from '@prometheus-io/lezer-promql';
import { expressionParam, type ExpressionError } from './expression.js';

/**
 * PromQL syntax through @prometheus-io/lezer-promql, the Prometheus project's own grammar (its web UI's editor
 * uses it). The parser recovers from errors and marks them in the tree; the first one is reported.
 */
export function promqlProblem(query: string): ExpressionError | undefined {
  const tree = parser.parse(query);
  let first: { from: number; to: number } | undefined;
  tree.iterate({
    enter: (n) => {
      if (first) return false;
      if (n.type.isError) first = { from: n.from, to: n.to };
      return undefined;
    },
  });
  if (!first) return undefined;
  const before = /([A-Za-z_][A-Za-z0-9_]*)\s*$/.exec(query.slice(0, first.from));
  if (before && query[first.from] === '(')
    return { message: `PromQL: unknown function ${JSON.stringify(before[1])}`, offset: before.index };
  const near = query.slice(first.from, Math.max(first.to, first.from + 1)).trim();
  return { message: `PromQL: syntax error ${near ? `at ${JSON.stringify(near)}` : 'at the end of the query'}`, offset: first.from };
}

/** A PromQL query param: its syntax is checked when the runbook is validated, the error located inside it. */
export const promqlQuery = () => expressionParam(promqlProblem);
