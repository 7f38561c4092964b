import { createServer } from 'node:net';
import type { Server } from 'node:http';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallLog } from './call-log.js';
import type { McpDeps } from './deps.js';
import { serveHttp } from './http.js';
import { createMcpServer } from './server.js';

const TOKEN = 'a-token-of-at-least-16-chars';

/** A TCP port free on 127.0.0.1 just now. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};

let http: Server | undefined;
afterEach(() => new Promise<void>((done) => (http ? http.close(() => done()) : done())));

describe('kube-runbook mcp --http', () => {
  it('listens on 127.0.0.1 only, and answers only requests with its bearer token', async () => {
    const port = await freePort();
    http = await serveHttp(port, TOKEN, () => new McpServer({ name: 't', version: '1' }));
    expect(http.address()).toMatchObject({ address: '127.0.0.1', port });
    const post = (auth?: string) =>
      fetch(`http://127.0.0.1:${port}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(auth ? { authorization: auth } : {}),
        },
        body: JSON.stringify(initialize),
      });
    expect((await post()).status).toBe(401);
    expect((await post('Bearer not-the-token-at-all-xx')).status).toBe(401);
    const ok = await post(`Bearer ${TOKEN}`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("logs each session's calls in the one call log, under its client's name", async () => {
    const port = await freePort();
    const lines: string[] = [];
    const calls = new CallLog({ clock: { now: () => 0 }, say: (l) => lines.push(l) });
    const options = { runbooks: [], allowRuns: false, packageDir: resolve(import.meta.dirname, '..', '..') };
    http = await serveHttp(port, TOKEN, () => createMcpServer({} as McpDeps, options, { calls }));
    for (const name of ['first', 'second']) {
      const client = new Client({ name, version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
      });
      await client.connect(transport);
      await client.callTool({ name: 'list_runbooks', arguments: {} });
      await client.close();
    }
    expect(lines).toEqual([
      '1970-01-01T00:00:00.000Z mcp tool list_runbooks {} via first 1: answered (0 ms)',
      '1970-01-01T00:00:00.000Z mcp tool list_runbooks {} via second 1: answered (0 ms)',
    ]);
  });
});
