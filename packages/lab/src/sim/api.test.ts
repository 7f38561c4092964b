import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from 'kube-runbook/internal/testing/wait.js';
import { SimApi } from './api.js';

/** A kubeconfig naming an address nothing answers on: only the socket can reach the "apiserver". */
function kubeconfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'lab', server: 'http://192.0.2.1:6443', skipTLSVerify: true }],
    users: [{ name: 'node', token: 'not-a-real-token' }],
    contexts: [{ name: 'lab', cluster: 'lab', user: 'node' }],
    currentContext: 'lab',
  });
  return kc;
}

describe('SimApi through a node forwarder socket', () => {
  let dir: string;
  let server: Server;
  const seen: string[] = [];
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kr-simapi-'));
    seen.length = 0;
    server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url?.split('?')[0]}${req.url?.includes('watch=true') ? ' watch' : ''}`);
      res.setHeader('content-type', 'application/json');
      if (req.url?.includes('watch=true')) {
        res.end(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'p', resourceVersion: '7' } } })}\n`);
        return;
      }
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-3', uid: 'u3' } }));
    });
    await new Promise<void>((r) => server.listen(join(dir, 'api.sock'), r));
  });
  afterEach(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await rm(dir, { recursive: true, force: true });
  });

  it('sends its calls and its watches over the socket, not to the address', async () => {
    const api = new SimApi(kubeconfig(), 5_000, 4, join(dir, 'api.sock'));
    expect((await api.readNode('node-3'))?.metadata.uid).toBe('u3');
    const events: string[] = [];
    await new Promise<void>((resolve) => {
      void api.watcher.watch(
        '/api/v1/pods',
        { fieldSelector: 'spec.nodeName=node-3' },
        (type: string, obj: { metadata: { name: string } }) => events.push(`${type} ${obj.metadata.name}`),
        () => resolve(),
      );
    });
    await api.close();
    expect(seen).toEqual(['GET /api/v1/nodes/node-3', 'GET /api/v1/pods watch']);
    expect(events).toEqual(['ADDED p']);
  });

  it('drops its connections, a watch in progress too, and dials afresh on the next call', async () => {
    const sockets: { closed: boolean }[] = [];
    server.on('connection', (sock) => {
      const s = { closed: false };
      sockets.push(s);
      sock.on('close', () => (s.closed = true));
    });
    // a watch the server holds open and never writes to, as through a forwarder that stopped passing bytes
    server.removeAllListeners('request');
    server.on('request', (req, res) => {
      seen.push(`${req.method} ${req.url?.split('?')[0]}${req.url?.includes('watch=true') ? ' watch' : ''}`);
      res.setHeader('content-type', 'application/json');
      if (req.url?.includes('watch=true')) return void res.flushHeaders();
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-3', uid: 'u3' } }));
    });
    const api = new SimApi(kubeconfig(), 5_000, 4, join(dir, 'api.sock'));
    await api.readNode('node-3');
    let watchEnded: unknown = 'running';
    const ended = new Promise<void>((resolve) => {
      void api.watcher.watch(
        '/api/v1/pods',
        {},
        () => {},
        (err: unknown) => {
          watchEnded = err;
          resolve();
        },
      );
    });
    await waitFor('the node read and the watch sent', () => seen.length === 2, 2_000, 10);
    expect(sockets).toHaveLength(2);

    api.closeConnections();
    await ended;
    expect(watchEnded).toBeTruthy();
    await waitFor('every old connection closed', () => sockets.every((s) => s.closed), 2_000, 10);
    expect((await api.readNode('node-3'))?.metadata.uid).toBe('u3');
    expect(sockets).toHaveLength(3);
    expect(sockets[2]!.closed).toBe(false);
    await api.close();
  });

  it('fails fast when the forwarder is gone (a stopped kubelet), without reaching the address', async () => {
    const api = new SimApi(kubeconfig(), 5_000, 4, join(dir, 'nothing.sock'));
    const e = await api.readNode('node-3').then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(JSON.stringify(causes(e))).toContain('ENOENT');
    await api.close();
    expect(seen).toEqual([]);
  });
});

/** The codes and messages of an error and its causes. */
function causes(e: unknown): string[] {
  const out: string[] = [];
  for (let x = e as { code?: string; message?: string; cause?: unknown } | undefined; x; x = x.cause as typeof x)
    out.push(`${x.code ?? ''} ${x.message ?? ''}`);
  return out;
}
