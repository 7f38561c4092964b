import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import { readingFromServer, TestServer } from '../testing/real-server.js';
import probe, { type HttpValue } from './http.js';

let t: ProbeTester;
const server = new TestServer();
afterEach(async () => {
  await t.close();
  await server.close();
});

async function serve(answer: () => { status: number; body: string }): Promise<string> {
  const base = await server.start((_, res) => {
    const a = answer();
    res.writeHead(a.status).end(a.body);
  });
  return `${base}/healthz`;
}

/** Waits (really: the server is real) until the probe yielded a reading matching `pred`. */
const until = (run: ReturnType<ProbeTester['start']>, pred: (s: string) => boolean) =>
  readingFromServer(t, run, (x) => pred(x.status), { tries: 200, realMs: 10, fakeMs: 50 });

describe('http', () => {
  it('reads ok on a 2xx with a matching body and violated on anything else', async () => {
    t = new ProbeTester();
    let answer = { status: 200, body: 'ok' };
    const url = await serve(() => answer);
    const run = t.start(probe, { url, interval: '100ms', bodyMatches: '^ok$' });
    const ok = await until(run, (s) => s === 'ok');
    expect((ok.value as HttpValue).status).toBe(200);
    answer = { status: 200, body: 'degraded' };
    const bad = await until(run, (s) => s === 'violated');
    expect(bad.detail).toMatch(/^200 in .*: body does not match \/\^ok\$\/$/);
    answer = { status: 503, body: 'ok' };
    run.readings.length = 0;
    const down = await until(run, (s) => s === 'violated');
    expect(down.detail).toMatch(/^503 in .*: unexpected status$/);
  });

  it('reads a refused connection as violated, or unknown when asked', async () => {
    t = new ProbeTester();
    const url = await serve(() => ({ status: 200, body: '' }));
    await server.close();
    const run = t.start(probe, { url, unreachable: 'unknown' });
    const r = await until(run, (s) => s === 'unknown');
    expect(r.detail).toMatch(/^no answer: .*ECONNREFUSED/);
  });

  it('matches the body in linear time: a catastrophic pattern on a long aaa…b reads violated at once', async () => {
    t = new ProbeTester();
    let answer = { status: 200, body: `${'a'.repeat(40)}b` };
    const url = await serve(() => answer);
    const run = t.start(probe, { url, interval: '100ms', bodyMatches: '(a+)+$' });
    const bad = await until(run, (s) => s === 'violated');
    expect(bad.detail).toMatch(/: body does not match \/\(a\+\)\+\$\/$/);
    answer = { status: 200, body: 'aaaa' };
    await until(run, (s) => s === 'ok');
  });

  it('reads at most 1 MiB of a body and says so when the pattern is not in it', async () => {
    t = new ProbeTester();
    const url = await serve(() => ({ status: 200, body: `${'x'.repeat(2 * 1024 * 1024)}ready` }));
    const run = t.start(probe, { url, bodyMatches: 'ready' });
    const bad = await until(run, (s) => s === 'violated');
    expect(bad.detail).toMatch(/: body does not match \/ready\/ in its first 1 MiB$/);
  });

  it('refuses at validate a pattern RE2 does not take', () => {
    const r = probe.meta.params.safeParse({ url: 'http://example.com/', bodyMatches: '(?<=ok)x' });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(/^not an RE2 regular expression: /);
    expect(probe.meta.params.safeParse({ url: 'http://example.com/', bodyMatches: '^(ok|ready)$' }).success).toBe(true);
  });

  it('refuses a URL that is not http(s)', () => {
    expect(probe.meta.params.safeParse({ url: 'ftp://example.com/' }).success).toBe(false);
  });
});
