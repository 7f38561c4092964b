import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import { readingFromServer, TestServer } from '../testing/real-server.js';
import probe, { type AvailabilityValue } from './apiserver-availability.js';
import { inventoryOf } from '../testing/inventories.js';

let t: ProbeTester;
const server = new TestServer();
afterEach(async () => {
  await t.close();
  await server.close();
});

/** A VIP whose answer the test changes: 200, 503, or (down) a closed port. */
const serve = (answer: () => number): Promise<string> =>
  server.start((req, res) => res.writeHead(req.url === '/readyz' ? answer() : 404).end('ok'));

const until = (run: ReturnType<ProbeTester['start']>, pred: (v: AvailabilityValue, status: string) => boolean) =>
  readingFromServer(t, run, (x) => pred(x.value as AvailabilityValue, x.status), { tries: 400, realMs: 5, fakeMs: 100 });

describe('apiserver-availability', () => {
  it('counts errors and measures the gap from the last answer to the next; violated only past maxGap', async () => {
    t = new ProbeTester();
    let status = 200;
    const url = await serve(() => status);
    const run = t.start(probe, { url, interval: '500ms', maxGap: '3s' });
    const up = await until(run, (v) => v.up);
    expect(up.status).toBe('ok');
    expect(up.value).toMatchObject({ url: `${url}/readyz`, errors: 0, currentGapMs: 0 });
    status = 503;
    const short = await until(run, (v) => !v.up);
    expect(short.status).toBe('ok');
    expect(short.detail).toMatch(/^no answer for .* \(HTTP 503\); \d+ request\(s\), 1 error\(s\)/);
    const long = await until(run, (_, s) => s === 'violated');
    expect((long.value as AvailabilityValue).currentGapMs).toBeGreaterThan(3000);
    status = 200;
    const back = await until(run, (v, s) => v.up && s === 'ok' && v.errors > 0);
    const v = back.value as AvailabilityValue;
    expect(v.longestGapMs).toBeGreaterThan(3000);
    expect(v.currentGapMs).toBe(0);
  });

  it('defaults to the inventory VIP and reads a closed port as an error', async () => {
    t = new ProbeTester({
      inventory: inventoryOf(
        {
          layout: 'lab',
          lab: { stateDir: '/x' },
          apiserver: { endpoints: ['127.0.0.1:1'] },
          nodes: [{ name: 'cp-1', roles: ['control-plane'] }],
        },
        'ha',
      ),
    });
    const run = t.start(probe, { timeout: '500ms' });
    const r = await until(run, (_, s) => s === 'violated');
    expect((r.value as AvailabilityValue).url).toBe('https://127.0.0.1:1/readyz');
    expect((r.value as AvailabilityValue).errors).toBeGreaterThan(0);
  });
});
