import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { sh } from '../host/host.js';
import { freePort, otelEndpoint, otelService, writeOtelConfig, type OtelPlan } from './otel.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

const plan = (o: Partial<OtelPlan> = {}): OtelPlan => ({
  instance: 'otl',
  dir: '/s/nodes/otel/otelcol',
  host: '10.213.4.1',
  port: 40123,
  binary: '/c/otelcol-0.165.0/otelcol',
  ...o,
});

describe("the lab's OTLP receiver", () => {
  let dir = '';
  tempDirEach('kr-otel-', (d) => (dir = d));

  it('takes OTLP over HTTP on the lab address and writes traces and metrics to otlp.jsonl in its directory', async () => {
    const file = await writeOtelConfig(plan({ dir }));
    const cfg = parse(await readFile(file, 'utf8')) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(cfg.receivers.otlp.protocols).toEqual({ http: { endpoint: '10.213.4.1:40123' } });
    expect(cfg.exporters.file.path).toBe(`${dir}/otlp.jsonl`);
    expect(cfg.service.pipelines).toEqual({
      traces: { receivers: ['otlp'], exporters: ['file'] },
      metrics: { receivers: ['otlp'], exporters: ['file'] },
    });
    // no listener of its own on this machine's :8888
    expect(cfg.service.telemetry.metrics).toEqual({ level: 'none' });
    expect(otelEndpoint(plan())).toBe('http://10.213.4.1:40123');
  });

  it("runs with its configuration's path on its command line (so `lab down` finds it by the state directory)", () => {
    const s = otelService(plan());
    expect(s.command).toEqual(['/c/otelcol-0.165.0/otelcol', '--config=file:/s/nodes/otel/otelcol/config.yaml']);
    expect(s.netns).toBeUndefined();
  });

  it('is healthy when its receiver takes an OTLP request, not before', async () => {
    const got: string[] = [];
    const server = createServer((req, res) => {
      got.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      res.writeHead(req.method === 'POST' ? 200 : 405).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      expect((await sh(otelService(plan({ host: '127.0.0.1', port })).health)).code).toBe(0);
      expect(got).toEqual(['POST /v1/traces application/json']);
      const closed = await freePort('127.0.0.1');
      expect((await sh(otelService(plan({ host: '127.0.0.1', port: closed })).health)).code).not.toBe(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
