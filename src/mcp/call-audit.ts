import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallLog, CallType } from './call-log.js';
import { type Decision, decisionOf, thrownDecision } from './sink.js';

type Handler = (request: { params: Record<string, unknown> }, extra: unknown) => unknown;

/** An MCP error's code as a stable code of ours: InvalidParams → INVALID_PARAMS. */
const mcpCode = (code: number): string => (ErrorCode[code] ?? `MCP_ERROR_${code}`).replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();

/** What a thrown error decides: the SDK's own (an unknown resource or prompt, bad arguments) refuses with its code. */
const fromError = (e: unknown): Decision =>
  e instanceof McpError ? { decision: 'refused', code: mcpCode(e.code), reason: e.message } : thrownDecision(e);

/**
 * A tool call's decision as the tool said it (sink.ts); a result without one comes from the SDK, which refused the call
 * before any tool ran (an unknown or disabled tool, arguments its schema rejects) with InvalidParams.
 */
function toolDecision(result: unknown): Decision {
  const said = decisionOf(result);
  if (said) return said;
  const r = result as { isError?: boolean; content?: { type: string; text?: string }[] };
  const text = (r.content ?? []).map((c) => c.text ?? '').join('\n');
  return r.isError ? { decision: 'refused', code: mcpCode(ErrorCode.InvalidParams), reason: text } : { decision: 'answered' };
}

/** The requests logged: what each is called, with what, and how its outcome reads. */
const AUDITED = new Map<
  unknown,
  { type: CallType; name: (p: Record<string, unknown>) => string; args: boolean; decide: (r: unknown) => Decision }
>([
  [CallToolRequestSchema, { type: 'tool', name: (p) => String(p.name), args: true, decide: toolDecision }],
  [ReadResourceRequestSchema, { type: 'resource', name: (p) => String(p.uri), args: false, decide: () => ({ decision: 'answered' }) }],
  [GetPromptRequestSchema, { type: 'prompt', name: (p) => String(p.name), args: true, decide: () => ({ decision: 'answered' }) }],
]);

/**
 * Logs every tool call, resource read and prompt of `server` (call-log.ts), also those the SDK refuses before a tool
 * runs: the handlers McpServer installs for tools/call, resources/read and prompts/get are wrapped as it installs them
 * (it does so on the first tool, resource or prompt registered), so this must run before any is. The client's own
 * arguments are logged, as it sent them.
 */
export function auditCalls(server: McpServer, log: CallLog): void {
  const inner = server.server;
  const install = inner.setRequestHandler.bind(inner) as (schema: unknown, handler: Handler) => void;
  const client = () => {
    const v = inner.getClientVersion();
    return v ? `${v.name} ${v.version}` : undefined;
  };
  const wrapped = (schema: unknown, handler: Handler): void => {
    const audited = AUDITED.get(schema);
    if (!audited) return install(schema, handler);
    install(schema, async (request, extra) => {
      const p = request.params;
      const call = log.start(audited.type, audited.name(p), audited.args ? p.arguments : undefined, client());
      try {
        const result = await handler(request, extra);
        call.end(audited.decide(result));
        return result;
      } catch (e) {
        call.end(fromError(e));
        throw e;
      }
    });
  };
  inner.setRequestHandler = wrapped as typeof inner.setRequestHandler;
}
