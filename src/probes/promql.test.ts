import { once } from 'node:events';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProbeRun } from '../testing/probe-tester.js';
import { ProbeTester } from '../testing/probe-tester.js';
import { readingNumbers } from '../contract/reading-numbers.js';
import probe from './promql.js';
import { promqlProblem } from './parts/promql.js';
import { inventoryOf } from '../testing/inventories.js';

/** A stand-in Prometheus on a local port: answers /api/v1/query with whatever `answer` says. */
class FakePrometheus {
  readonly server: Server;
  answer: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end('{}');
  readonly requests: { query: string | null; auth?: string }[] = [];
  constructor() {
    this.server = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      this.requests.push({ query: u.searchParams.get('query'), auth: req.headers.authorization });
      this.answer(req, res);
    });
  }
  async listen(): Promise<string> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  vector(...values: (number | string)[]) {
    this.answer = (_req, res) => {
      const result = values.map((v, i) => ({ metric: { instance: `etcd-${i}` }, value: [1700000000, String(v)] }));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result } }));
    };
  }
}

let t: ProbeTester;

/** A file holding the bearer token `sekrit`, as a user writes one. */
function tokenFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'kr-promql-')), 'token');
  writeFileSync(file, 'sekrit\n');
  return file;
}
let prom: FakePrometheus;
afterEach(async () => {
  await t.close();
  prom.server.closeAllConnections();
  prom.server.close();
});

/** Waits in real time (HTTP is real; the run's clock is not) until the probe has yielded `n` readings. */
async function readings(run: ProbeRun, n: number) {
  for (let i = 0; i < 500 && run.readings.length < n; i++) await new Promise((r) => setTimeout(r, 10));
  expect(run.readings.length).toBeGreaterThanOrEqual(n);
  return run.readings[n - 1]!;
}

const query = 'histogram_quantile(0.99, sum by (le) (rate(etcd_disk_wal_fsync_duration_seconds_bucket[1m])))';

describe('promql', () => {
  it('compares every series with the comparator and is violated only once it failed for `for`', async () => {
    t = new ProbeTester();
    prom = new FakePrometheus();
    const url = await prom.listen();
    prom.vector(0.01, 0.02);
    const run = t.start(probe, { url, query, comparator: { op: '<', value: 0.5 }, for: '10s', interval: '5s' });
    expect(await readings(run, 1)).toMatchObject({ status: 'ok', detail: '{instance="etcd-0"} 0.01, {instance="etcd-1"} 0.02 (< 0.5)' });
    expect(prom.requests[0]?.query).toBe(query);
    prom.vector(0.01, 0.8);
    await t.advance(5000);
    expect(await readings(run, 2)).toMatchObject({ status: 'ok', detail: '{instance="etcd-1"} 0.8 not < 0.5; pending 0ms of 10s' });
    await t.advance(5000);
    expect(await readings(run, 3)).toMatchObject({ status: 'ok', detail: '{instance="etcd-1"} 0.8 not < 0.5; pending 5s of 10s' });
    await t.advance(5000);
    const v = await readings(run, 4);
    expect(v).toMatchObject({ status: 'violated', detail: '{instance="etcd-1"} 0.8 not < 0.5' });
    expect(v.value).toMatchObject({ series: [{ value: 0.01 }, { value: 0.8 }] });
    // the numbers a report charts: each series by its labels, `value` for one without
    expect(readingNumbers(probe.meta.numbers, v.value)).toEqual({ '{instance="etcd-0"}': 0.01, '{instance="etcd-1"}': 0.8 });
    expect(readingNumbers(probe.meta.numbers, { series: [{ labels: {}, value: 2 }] })).toEqual({ value: 2 });
    prom.vector(0.1);
    await t.advance(5000);
    expect(await readings(run, 5)).toMatchObject({ status: 'ok', detail: '0.1 (< 0.5)' });
  });

  it('reads unknown, never ok, when Prometheus errs, is unreachable or too slow; an empty result reads as `empty` says', async () => {
    t = new ProbeTester();
    prom = new FakePrometheus();
    const url = await prom.listen();
    prom.answer = (_req, res) => {
      res.statusCode = 422;
      res.end(JSON.stringify({ status: 'error', errorType: 'execution', error: 'query timed out' }));
    };
    const run = t.start(probe, { url, query: 'up', comparator: { between: [1, 1] }, interval: '5s', timeout: '2s' });
    expect(await readings(run, 1)).toMatchObject({ status: 'unknown', detail: `cannot query ${url}: HTTP 422: query timed out` });
    prom.answer = () => {}; // never answers
    await t.advance(5000);
    await new Promise((r) => setTimeout(r, 50));
    await t.advance(2000);
    expect(await readings(run, 2)).toMatchObject({ status: 'unknown', detail: `cannot query ${url}: no answer within 2s` });
    prom.vector();
    await t.advance(5000);
    expect(await readings(run, 3)).toMatchObject({ status: 'unknown', detail: 'no series (reads unknown)' });
    prom.vector('NaN');
    const empty = t.start(probe, { url, query: 'up', comparator: { op: '==', value: 1 }, empty: 'violated' });
    expect(await readings(empty, 1)).toMatchObject({ status: 'violated', detail: 'no series (reads violated)' });
    prom.server.closeAllConnections();
    prom.server.close();
    const gone = t.start(probe, { url, query: 'up', comparator: { op: '==', value: 1 } });
    expect((await readings(gone, 1)).status).toBe('unknown');
    expect((await readings(gone, 1)).detail).toMatch(/^cannot query .*: (connect )?ECONNREFUSED|fetch failed/);
  });

  it("sends the bearer token, and takes the inventory's Prometheus when the runbook gives none", async () => {
    prom = new FakePrometheus();
    const url = await prom.listen();
    t = new ProbeTester({
      inventory: inventoryOf(
        { layout: 'lab', prometheus: { url, bearerTokenFile: tokenFile(), tokenOverHttp: true }, nodes: [{ name: 'n' }] },
        'x',
      ),
    });
    prom.vector(1);
    const run = t.start(probe, { query: 'up', comparator: { op: '==', value: 1 } });
    expect(await readings(run, 1)).toMatchObject({ status: 'ok', detail: '1 (== 1)' });
    expect(prom.requests[0]?.auth).toBe('Bearer sekrit');
    expect(JSON.stringify(run.readings)).not.toContain('sekrit');
  });

  it('does not send a bearer token over plain http without tokenOverHttp, and validate says so at the url', async () => {
    prom = new FakePrometheus();
    const url = await prom.listen();
    const token = tokenFile();
    t = new ProbeTester({
      inventory: inventoryOf({ layout: 'lab', prometheus: { url }, nodes: [{ name: 'n' }] }, 'x'),
    });
    prom.vector(1);
    // the runbook's token, the inventory's http url: only the run can see the two together
    const own = t.start(probe, { query: 'up', comparator: { op: '==', value: 1 }, bearerTokenFile: token });
    const r = await readings(own, 1);
    expect(r.status).toBe('unknown');
    expect(r.detail).toBe(
      `cannot query ${url}: not sending the token of bearerTokenFile over plain http to ${url}: use https, or set tokenOverHttp: true (the probe)`,
    );
    expect(prom.requests).toEqual([]);
    const parsed = probe.meta.params.safeParse({ url, query: 'up', comparator: { op: '==', value: 1 }, bearerTokenFile: '/t' });
    expect(parsed.error?.issues).toMatchObject([
      { path: ['url'], message: 'the token of bearerTokenFile goes only over https: use an https:// url, or set tokenOverHttp: true' },
    ]);
    const optIn = t.start(probe, { url, query: 'up', comparator: { op: '==', value: 1 }, bearerTokenFile: token, tokenOverHttp: true });
    expect((await readings(optIn, 1)).status).toBe('ok');
    expect(prom.requests.map((q) => q.auth)).toEqual(['Bearer sekrit']);
  });

  it("sends the inventory's token only to the inventory's Prometheus, and follows no redirect", async () => {
    prom = new FakePrometheus();
    const url = await prom.listen();
    const other = new FakePrometheus();
    const otherUrl = await other.listen();
    t = new ProbeTester({
      inventory: inventoryOf(
        { layout: 'lab', prometheus: { url, bearerTokenFile: tokenFile(), tokenOverHttp: true }, nodes: [{ name: 'n' }] },
        'x',
      ),
    });
    try {
      other.vector(1);
      const elsewhere = t.start(probe, { url: otherUrl, query: 'up', comparator: { op: '==', value: 1 } });
      expect((await readings(elsewhere, 1)).status).toBe('ok');
      expect(other.requests.map((q) => q.auth)).toEqual([undefined]);
      prom.answer = (_req, res) => res.writeHead(307, { location: `${otherUrl}/api/v1/query?query=up` }).end();
      const redirected = t.start(probe, { query: 'up', comparator: { op: '==', value: 1 } });
      const r = await readings(redirected, 1);
      expect(r.status).toBe('unknown');
      expect(r.detail).toBe(
        `cannot query ${url}: HTTP 307: a redirect to "${otherUrl}/api/v1/query?query=up", not followed (give the url it names)`,
      );
      expect(prom.requests.map((q) => q.auth)).toEqual(['Bearer sekrit']);
      expect(other.requests).toHaveLength(1);
    } finally {
      other.server.closeAllConnections();
      other.server.close();
    }
  });

  it('refuses an answer larger than 8 MiB with a clear reading', async () => {
    prom = new FakePrometheus();
    const url = await prom.listen();
    t = new ProbeTester();
    prom.answer = (_req, res) =>
      res.end(`{"status":"success","data":{"resultType":"vector","result":[${'{"metric":{},"value":[1,"1"]},'.repeat(300_000)}]}}`);
    const run = t.start(probe, { url, query: 'up', comparator: { op: '==', value: 1 } });
    const r = await readings(run, 1);
    expect(r).toMatchObject({ status: 'unknown', detail: `cannot query ${url}: the answer is larger than 8 MiB: ask for fewer series` });
  });

  it('checks the query with the Prometheus grammar and says where the error is', () => {
    expect(promqlProblem(query)).toBeUndefined();
    expect(promqlProblem('rate(x[1m]')).toEqual({ message: 'PromQL: syntax error at the end of the query', offset: 10 });
    expect(promqlProblem('sum(rate(x[1q]))')).toEqual({ message: 'PromQL: syntax error at "q"', offset: 12 });
    expect(promqlProblem('histogram_quantil(0.99, x)')).toEqual({ message: 'PromQL: unknown function "histogram_quantil"', offset: 0 });
  });
});
