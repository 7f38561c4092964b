import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it, vi } from 'vitest';
import { realClock, type Clock } from '../core/clock.js';
import { startCallTelemetry } from '../telemetry/call-trace.js';
import { otelSettings } from '../telemetry/settings.js';
import { FakeClock } from '../testing/fake-clock.js';
import { CallLog } from './call-log.js';
import type { McpDeps } from './deps.js';
import { createMcpServer } from './server.js';

/** An OTLP/HTTP receiver (the exporters send JSON): keeps every request's path and body, answers 200; or, `silent`, never answers. */
async function receiver(o: { silent?: boolean } = {}) {
  const got: { path: string; body: string }[] = [];
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests++;
    if (o.silent) return;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    got,
    requests: () => requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

interface OtlpSpan {
  name: string;
  parentSpanId?: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: { stringValue?: string } }[];
}

const spansOf = (got: { path: string; body: string }[]): OtlpSpan[] =>
  got
    .filter((r) => r.path === '/v1/traces')
    .flatMap((r) =>
      (JSON.parse(r.body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((rs) =>
        rs.scopeSpans.flatMap((ss) => ss.spans),
      ),
    );

const attrs = (s: OtlpSpan) => Object.fromEntries(s.attributes.map((a) => [a.key, a.value.stringValue]));

/** Deps enough for halt, describe_module and list_runbooks; nothing else is called here. */
const deps = {
  halt: async (reason: string) => `halted: ${reason}`,
  describe: async () => [],
  runsDir: () => '/nonexistent/runs',
  reportsDir: () => '/nonexistent/mcp',
} as unknown as McpDeps;

/** A server whose calls go to `endpoint` as spans (the telemetry's deadline on `clock`), and a client of it. */
async function exporting(endpoint: string, clock: Clock = realClock) {
  const warnings: string[] = [];
  const telemetry = startCallTelemetry({ settings: otelSettings({}, { endpoint })!, clock, warn: (l) => warnings.push(l) });
  const log = new CallLog({ clock: realClock, say: () => undefined, telemetry });
  const server = createMcpServer(
    deps,
    { runbooks: [], allowRuns: false, packageDir: resolve(import.meta.dirname, '..', '..') },
    { calls: log },
  );
  const client = new Client({ name: 'test', version: '1' });
  const [c, s] = InMemoryTransport.createLinkedPair();
  await server.connect(s);
  await client.connect(c);
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { call, log, warnings };
}

const SECRETS = { reason: 'drill; Bearer abcdefghijklmnopqrstuvwxyz0123', token: 'hunter2-the-token' };

describe('MCP calls exported as OpenTelemetry spans', () => {
  it('sends one span per call, named after the tool, with its decision, code and redacted arguments', async () => {
    const r = await receiver();
    try {
      const { call, log, warnings } = await exporting(r.url);
      await call('halt', SECRETS);
      await call('describe_module', { id: 'nope' });
      await call('run_runbook', { runbook: 'x' });
      await log.close();
      expect(warnings).toEqual([]);
      const spans = spansOf(r.got);
      expect(spans.map((s) => s.name)).toEqual(['mcp.tool halt', 'mcp.tool describe_module', 'mcp.tool run_runbook']);
      expect(spans.every((s) => !s.parentSpanId && BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano))).toBe(true);
      expect(attrs(spans[0]!)).toEqual({
        'kube_runbook.mcp.type': 'tool',
        'kube_runbook.mcp.name': 'halt',
        'kube_runbook.mcp.decision': 'halted',
        'kube_runbook.mcp.client': 'test 1',
        'kube_runbook.mcp.argument.reason': 'drill; Bearer [redacted]',
        'kube_runbook.mcp.argument.token': '[redacted]',
      });
      expect(attrs(spans[1]!)).toMatchObject({ 'kube_runbook.mcp.decision': 'refused', 'kube_runbook.mcp.error_code': 'UNKNOWN_MODULE' });
      expect(attrs(spans[2]!)).toMatchObject({ 'kube_runbook.mcp.decision': 'refused', 'kube_runbook.mcp.error_code': 'INVALID_PARAMS' });
      for (const g of r.got) {
        expect(g.body).not.toContain('abcdefghijklmnopqrstuvwxyz0123');
        expect(g.body).not.toContain('hunter2');
      }
    } finally {
      await r.close();
    }
  });

  it('a collector that is down fails no call and costs one warning', async () => {
    const down = await receiver();
    await down.close();
    const { call, log, warnings } = await exporting(down.url);
    for (let i = 0; i < 3; i++) {
      const r = await call('halt', { reason: `drill ${i}` });
      expect(r.isError).toBeFalsy();
      expect(r.content).toEqual([{ type: 'text', text: `halted: drill ${i}` }]);
    }
    await log.close();
    expect(warnings).toEqual([expect.stringContaining(`could not be sent to ${down.url}`)]);
  });

  it('a collector that never answers holds up no call; the end waits for it on the clock, no longer', async () => {
    const silent = await receiver({ silent: true });
    const clock = new FakeClock();
    try {
      const { call, log, warnings } = await exporting(silent.url, clock);
      expect((await call('halt', { reason: 'first' })).isError).toBeFalsy();
      // the first span is at the collector, which holds it: the calls after it are answered all the same
      await vi.waitFor(() => expect(silent.requests()).toBe(1), { timeout: 10_000 });
      for (const id of ['a', 'b', 'c']) expect((await call('describe_module', { id })).content).toHaveLength(1);
      let closed = false;
      const closing = log.close().then(() => (closed = true));
      await clock.advance(4_900);
      expect(closed).toBe(false);
      await clock.advance(200);
      await closing;
      expect(warnings).toEqual([expect.stringMatching(/telemetry was not all sent to http:\/\/127\.0\.0\.1:\d+ in time$/)]);
    } finally {
      await silent.close();
    }
  });
});
