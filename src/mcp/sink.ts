import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isKrError, messageOf } from '../core/errors.js';
import { redact, redactText } from '../core/redact.js';

/**
 * The MCP server's one sink: everything a tool, a resource or a prompt hands the client (and so the model) passes
 * through here, redacted as console lines and reports are (src/core/redact.ts): text line by line, data whole, secret
 * keys dropped.
 */
export const safeText = (text: string): string => redactText(text);

export const safeData = (value: unknown): string => redactText(JSON.stringify(redact(value, Infinity), null, 2));

/** A tool's answer: text, and data as JSON after it. */
export function answer(text: string, data?: unknown): CallToolResult {
  const content: CallToolResult['content'] = [{ type: 'text', text: safeText(text) }];
  if (data !== undefined) content.push({ type: 'text', text: safeData(data) });
  return { content };
}

/** A refusal or a failure: one line saying why (and the error's stable code), marked as an error for the client. */
export function refusal(why: string, code?: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: safeText(code ? `${why} [${code}]` : why) }] };
}

/** A tool body's exception as a refusal: a KrError's message and code, anything else's message; never a stack trace. */
function failure(e: unknown): CallToolResult {
  if (isKrError(e)) return refusal([e.message, ...e.details].join('\n'), e.code);
  return refusal(`unexpected error: ${messageOf(e)}`);
}

/** Runs a tool body, turning what it throws into a refusal. */
export async function guarded(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (e) {
    return failure(e);
  }
}
