import { z } from 'zod';

/** An error inside an expression: the message and the character it is about. */
export interface ExpressionError {
  message: string;
  offset: number;
}

/**
 * A param holding an expression (a CEL condition, a PromQL query), checked by `problemOf` when the runbook is
 * validated: its error is reported with the position inside the expression it is about.
 */
export const expressionParam = (problemOf: (expression: string) => ExpressionError | undefined) =>
  z
    .string()
    .min(1)
    .superRefine((s, ctx) => {
      const p = problemOf(s);
      if (p) ctx.addIssue({ code: 'custom', message: p.message, params: { offset: p.offset } });
    });
