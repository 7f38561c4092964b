import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { EXIT, isKrError, messageOf } from '../core/errors.js';
import { redact, redactText } from '../core/redact.js';

/**
 * The MCP server's one sink: everything a tool, a resource or a prompt hands the client (and so the model) passes
 * through here, redacted as console lines and reports are (src/core/redact.ts): text line by line, data whole, secret
 * keys dropped.
 */
export const safeText = (text: string): string => redactText(text);

export const safeData = (value: unknown): string => redactText(JSON.stringify(redact(value, Infinity), null, 2));

/**
 * What the server decided on a call, said where it was decided (here, consent.ts, the tools) and written by the call
 * log (call-log.ts): `answered`, `refused` or `failed` with the error's stable code and why, the person's no
 * (`declined by the person`, `not answered by the person`, `denied: the client cannot ask`), or what it started
 * (`launched run NAME (process PID)`).
 */
export interface Decision {
  decision: string;
  code?: string;
  reason?: string;
  /** The person's answer, when a form asked them. */
  consent?: string;
}

const DECISION = Symbol('kube-runbook.mcp.decision');

/** A tool's result with its decision attached (a symbol: the client never sees it). */
export type Decided = CallToolResult & { readonly [DECISION]: Decision };

const decided = (result: CallToolResult, decision: Decision): Decided => Object.assign(result, { [DECISION]: decision });

/** The decision a tool attached to its result; undefined when no tool body ran (the SDK refused the call itself). */
export const decisionOf = (result: unknown): Decision | undefined =>
  typeof result === 'object' && result !== null ? (result as Partial<Decided>)[DECISION] : undefined;

/** A tool's answer: text, and data as JSON after it; `consent` when the person was asked and said yes. */
export function answer(text: string, data?: unknown, o: { decision?: string; consent?: string } = {}): Decided {
  const content: CallToolResult['content'] = [{ type: 'text', text: safeText(text) }];
  if (data !== undefined) content.push({ type: 'text', text: safeData(data) });
  return decided({ content }, { decision: o.decision ?? 'answered', ...(o.consent ? { consent: o.consent } : {}) });
}

/**
 * A refusal or a failure: one line saying why (and the error's stable code), marked as an error for the client;
 * `decision` says who or what refused (the person, the client) when it was not the server's own rule.
 */
export function refusal(why: string, code?: string, o: { decision?: string; consent?: string } = {}): Decided {
  return decided(
    { isError: true, content: [{ type: 'text', text: safeText(code ? `${why} [${code}]` : why) }] },
    { decision: o.decision ?? 'refused', ...(code ? { code } : {}), reason: why, ...(o.consent ? { consent: o.consent } : {}) },
  );
}

/**
 * What an exception decides: a KrError of bad input or a rule (`exit` invalid or refused) is `refused` with its code;
 * one of a failure (the cluster did not answer, the halt could not be written) is `failed` with its code; anything
 * else is `failed`, its message the reason.
 */
export function thrownDecision(e: unknown): Decision {
  if (isKrError(e))
    return {
      decision: e.exit === EXIT.invalid || e.exit === EXIT.refused ? 'refused' : 'failed',
      code: e.code,
      reason: [e.message, ...e.details].join('\n'),
    };
  return { decision: 'failed', reason: `unexpected error: ${messageOf(e)}` };
}

/** A tool body's exception as a refusal: a KrError's message and code, anything else's message; never a stack trace. */
function failure(e: unknown): Decided {
  const d = thrownDecision(e);
  return refusal(d.reason!, d.code, { decision: d.decision });
}

/** Runs a tool body, turning what it throws into a refusal. */
export async function guarded(body: () => Promise<Decided>): Promise<Decided> {
  try {
    return await body();
  } catch (e) {
    return failure(e);
  }
}
