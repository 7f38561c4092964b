import { createServer } from 'node:net';
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { serveHttp } from './http.js';

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
});
