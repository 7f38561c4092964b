import { randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

const HOST = '127.0.0.1';

/** Whether the request carries `Authorization: Bearer TOKEN`, compared in constant time. */
function authorized(req: IncomingMessage, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '');
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

function reject(res: ServerResponse, status: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function body(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 4 * 1024 * 1024) throw new Error('request body too large');
    chunks.push(c);
  }
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
}

/**
 * MCP over Streamable HTTP on 127.0.0.1:PORT only (never another interface), path /mcp, every request with
 * `Authorization: Bearer TOKEN` (any process of this machine can connect to a loopback port: without the token, one
 * could answer its own confirmation forms), the Host header checked against DNS rebinding. One server per session,
 * made by `newServer`, so that each client's confirmations go to that client.
 */
export async function serveHttp(port: number, token: string, newServer: () => McpServer): Promise<Server> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req, res) => {
    void (async () => {
      if (new URL(req.url ?? '/', `http://${HOST}`).pathname !== '/mcp') return reject(res, 404, 'not found: the MCP endpoint is /mcp');
      if (!authorized(req, token))
        return reject(res, 401, 'unauthorized: send Authorization: Bearer TOKEN (the token kube-runbook mcp was given)');
      const id = req.headers['mcp-session-id'];
      const parsed = req.method === 'POST' ? await body(req) : undefined;
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        if (id !== undefined || req.method !== 'POST' || !isInitializeRequest(parsed))
          return reject(res, 400, 'no such session: initialize first');
        const t = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => void sessions.set(sid, t),
          enableDnsRebindingProtection: true,
          allowedHosts: [`${HOST}:${port}`, `localhost:${port}`],
        });
        t.onclose = () => {
          if (t.sessionId) sessions.delete(t.sessionId);
        };
        await newServer().connect(t);
        transport = t;
      }
      await transport.handleRequest(req, res, parsed);
    })().catch((e: unknown) => {
      if (!res.headersSent) reject(res, 400, `bad request: ${(e as Error).message}`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, HOST, () => resolve());
  });
  return http;
}
