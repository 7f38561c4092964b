import { closeSync, openSync, writeSync } from 'node:fs';
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { Clock } from '../core/clock.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import { redact, redactText } from '../core/redact.js';
import type { CallTelemetry } from '../telemetry/call-trace.js';
import type { Decision } from './sink.js';

/** What a client asked for: a tool called, a resource read, a prompt got. */
export type CallType = 'tool' | 'resource' | 'prompt';

/** One call as the log writes it (a JSON line of `--log FILE`), redacted. */
export interface CallEntry extends Decision {
  /** When the call came in (ISO 8601, UTC). */
  time: string;
  type: CallType;
  /** The tool's or prompt's name, or the resource's URI. */
  name: string;
  /** The arguments as the client sent them, before they were checked. */
  arguments?: unknown;
  /** The client's name and version, as it said them when it connected. */
  client?: string;
  durationMs: number;
}

/** Where the log's lines go besides the person's line on stderr. */
export interface CallLogOptions {
  clock: Pick<Clock, 'now'>;
  /** One line of text (stderr; never stdout, which is the protocol over stdio). */
  say: (line: string) => void;
  /** `--log FILE`: one JSON line per call. */
  file?: JsonLines;
  /** `--otel-endpoint` or the OTEL_* environment: one span per call. */
  telemetry?: CallTelemetry;
}

/** A call started: `end` writes its line with what was decided. */
export interface OpenCall {
  end(decision: Decision): void;
}

const MAX_REASON = 1_000;

/** Why, on one line and not too long. */
const oneLine = (s: string) => {
  const flat = s.replace(/\s*\n\s*/g, '; ');
  return flat.length > MAX_REASON ? `${flat.slice(0, MAX_REASON)}…` : flat;
};

/** Control characters (a line break, a terminal escape) as JSON writes them: a client's tool name cannot forge a line. */
const CONTROL = /[\p{Cc}\u2028\u2029]/gu;
const escaped = (s: string) => s.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `2026-12-02T08:00:00.000Z mcp tool run_runbook {"runbook":"x"} via claude-code 1.0: declined by the person [NOT_CONFIRMED]: refused: the user answered decline (812 ms)` */
function callLine(e: CallEntry): string {
  const args = e.arguments === undefined ? '' : ` ${JSON.stringify(e.arguments)}`;
  const consent = e.consent && e.consent !== e.decision ? `; ${e.consent}` : '';
  return escaped(
    redactText(
      `${e.time} mcp ${e.type} ${e.name}${args}${e.client ? ` via ${e.client}` : ''}: ${e.decision}${e.code ? ` [${e.code}]` : ''}` +
        `${e.reason ? `: ${oneLine(e.reason)}` : ''}${consent} (${e.durationMs} ms)`,
    ),
  );
}

/** Arguments longer than this as JSON are logged cut, as a string (a client can send megabytes to any tool name). */
const MAX_ARGUMENTS = 4_000;
/** A name (a tool's, a resource's URI, the client's) longer than this is logged cut. */
const MAX_NAME = 200;

const cut = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters, cut)`);

/** The entry with its name, client and arguments (as JSON) cut, after redaction (a secret is never half cut). */
function capped(e: CallEntry): CallEntry {
  const json = e.arguments === undefined ? '' : JSON.stringify(e.arguments);
  return {
    ...e,
    name: cut(e.name, MAX_NAME),
    ...(e.client === undefined ? {} : { client: cut(e.client, MAX_NAME) }),
    ...(json.length > MAX_ARGUMENTS ? { arguments: cut(json, MAX_ARGUMENTS) } : {}),
  };
}

const attribute = (v: unknown): AttributeValue =>
  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : JSON.stringify(v);

/** The call as span attributes: `kube_runbook.mcp.decision`, `.error_code`, `.argument.KEY`, ... */
function spanAttributes(e: CallEntry): Attributes {
  const a: Attributes = { 'kube_runbook.mcp.type': e.type, 'kube_runbook.mcp.name': e.name, 'kube_runbook.mcp.decision': e.decision };
  if (e.code) a['kube_runbook.mcp.error_code'] = e.code;
  if (e.reason) a['kube_runbook.mcp.reason'] = oneLine(e.reason);
  if (e.consent) a['kube_runbook.mcp.consent'] = e.consent;
  if (e.client) a['kube_runbook.mcp.client'] = e.client;
  if (typeof e.arguments === 'object' && e.arguments !== null && !Array.isArray(e.arguments))
    for (const [k, v] of Object.entries(e.arguments)) a[`kube_runbook.mcp.argument.${k}`] = attribute(v);
  else if (e.arguments !== undefined) a['kube_runbook.mcp.arguments'] = attribute(e.arguments);
  return a;
}

/**
 * The MCP server's audit trail: one line per tool call, resource read and prompt, with what was decided, written here
 * and nowhere else: text on stderr, a JSON line in `--log FILE`, a span when telemetry is on. Every entry passes
 * src/core/redact.ts once, whole (a key like `token` loses its value, a token-looking string is cut), before any of them.
 */
export class CallLog {
  constructor(private readonly o: CallLogOptions) {}

  start(type: CallType, name: string, args: unknown, client: string | undefined): OpenCall {
    const startMs = this.o.clock.now();
    let ended = false;
    return {
      end: (d) => {
        if (ended) return;
        ended = true;
        const endMs = this.o.clock.now();
        this.write(startMs, endMs, {
          time: new Date(startMs).toISOString(),
          type,
          name,
          ...(args === undefined ? {} : { arguments: args }),
          ...(client ? { client } : {}),
          decision: d.decision,
          ...(d.code ? { code: d.code } : {}),
          ...(d.reason ? { reason: d.reason } : {}),
          ...(d.consent ? { consent: d.consent } : {}),
          durationMs: Math.max(0, Math.round(endMs - startMs)),
        });
      },
    };
  }

  /** The one place a call's line is written; a line that cannot be written costs a warning, never the call. */
  private write(startMs: number, endMs: number, raw: CallEntry): void {
    try {
      this.lines(startMs, endMs, raw);
    } catch (err) {
      this.o.say(`kube-runbook: warning: an MCP call of ${raw.type} ${raw.name} could not be logged: ${messageOf(err)}`);
    }
  }

  private lines(startMs: number, endMs: number, raw: CallEntry): void {
    const e = capped(redact(raw, Infinity) as CallEntry);
    this.o.say(callLine(e));
    this.o.file?.write(JSON.stringify(e));
    this.o.telemetry?.onCall({
      name: `mcp.${e.type} ${e.name}`,
      startMs,
      endMs,
      attributes: spanAttributes(e),
      ...(e.decision === 'failed' ? { error: oneLine(e.reason ?? 'failed') } : {}),
    });
  }

  /** Sends the spans left and closes the file; never throws. */
  async close(): Promise<void> {
    this.o.file?.close();
    await this.o.telemetry?.shutdown();
  }
}

/** An append-only file of JSON lines, written line by line (synchronously: a line is on disk before the answer leaves). */
export interface JsonLines {
  write(line: string): void;
  close(): void;
}

/**
 * `--log FILE`, opened for appending (created 0600: arguments are redacted, but the trail is the operator's alone).
 * MCP_LOG_FILE (exit 2) when it cannot be opened; a write that fails later costs one warning, never a call.
 */
export function jsonLinesFile(path: string, warn: (line: string) => void): JsonLines {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'a', 0o600);
  } catch (e) {
    throw new KrError('MCP_LOG_FILE', `--log ${quote(path)}: cannot open it for appending: ${messageOf(e)}`, { exit: EXIT.invalid });
  }
  return {
    write(line) {
      if (fd === undefined) return;
      try {
        writeSync(fd, `${line}\n`);
      } catch (e) {
        warn(
          `kube-runbook: warning: the MCP call log ${quote(path)} could not be written (${messageOf(e)}); calls go on, logged on stderr only`,
        );
        try {
          closeSync(fd);
        } catch {
          // closed already
        }
        fd = undefined;
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
