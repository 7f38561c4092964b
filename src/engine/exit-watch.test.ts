import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import { FakeClock } from '../testing/fake-clock.js';
import { eventually } from '../testing/wait.js';
import { runExitWatcher } from './exit-watcher.js';

const ROLE = { path: '/apis/rbac.authorization.k8s.io/v1/clusterroles/kube-runbook-load-x', uid: 'uid-1', what: 'the identity' };
const LEASE = { path: '/apis/coordination.k8s.io/v1/namespaces/kr-load/leases/load-1', uid: 'uid-2', what: 'the lease' };

/** A cluster that records DELETEs and answers each path as `answers` says (a list: one answer per attempt). */
function fakeKube(answers: Record<string, number[]> = {}) {
  const deletes: { path: string; body: unknown }[] = [];
  const kube = {
    json: (path: string, o: { method?: string; body?: unknown } = {}) => {
      if (o.method !== 'DELETE') throw new Error(`unexpected ${o.method} ${path}`);
      deletes.push({ path, body: o.body });
      const status = answers[path]?.shift() ?? 200;
      return status === 200 ? Promise.resolve({}) : Promise.reject(new ApiStatusError(status, `answered ${status}`));
    },
  } as unknown as KubeAccess;
  return { kube, deletes };
}

async function watch(lines: unknown[], kube: KubeAccess) {
  const input = new PassThrough();
  const log = memoryLogger();
  const clock = new FakeClock();
  const connected: unknown[] = [];
  const done = runExitWatcher(input, {
    clock,
    log,
    connect: (s) => {
      connected.push(s);
      return kube;
    },
  });
  for (const l of lines) input.write(`${JSON.stringify(l)}\n`);
  input.end();
  let settled = false;
  void done.finally(() => (settled = true));
  // the retries sleep on the clock
  for (let i = 0; i < 1000 && !settled; i++) await clock.advance(1000);
  return { left: await done, log, connected };
}

const START = { kube: { kubeconfig: '/k', context: 'lab' }, deadlineMs: 60_000 };

describe('the exit watcher', () => {
  it('deletes what is held when its input ends, each with its uid as a precondition, in the cluster it was told', async () => {
    const { kube, deletes } = fakeKube();
    const { left, connected } = await watch([START, { add: 'a', objects: [ROLE] }, { add: 'b', objects: [LEASE] }], kube);
    expect(left).toEqual([]);
    expect(connected).toEqual([START.kube]);
    expect(deletes).toEqual([
      { path: ROLE.path, body: expect.objectContaining({ preconditions: { uid: 'uid-1' } }) },
      { path: LEASE.path, body: expect.objectContaining({ preconditions: { uid: 'uid-2' } }) },
    ]);
  });

  it('leaves alone what was forgotten (the revert removed it), and reaches for no cluster when nothing is held', async () => {
    const { kube, deletes } = fakeKube();
    const { connected } = await watch([START, { add: 'a', objects: [ROLE] }, { forget: 'a' }], kube);
    expect(deletes).toEqual([]);
    expect(connected).toEqual([]);
  });

  it('takes gone (404) and another object of the name (409: the uid differs) as done, and retries an apiserver that struggles', async () => {
    const { kube, deletes } = fakeKube({ [ROLE.path]: [404], [LEASE.path]: [503, 429, 200] });
    const { left, log } = await watch([START, { add: 'a', objects: [ROLE, LEASE] }], kube);
    expect(left).toEqual([]);
    expect(deletes.map((d) => d.path)).toEqual([ROLE.path, LEASE.path, LEASE.path, LEASE.path]);
    expect(log.lines.map((l) => l.msg)).toContain('exit watch: the identity was gone already');
  });

  it('says what it could not delete', async () => {
    const { kube } = fakeKube({ [ROLE.path]: [403] });
    const { left } = await watch([START, { add: 'a', objects: [ROLE] }], kube);
    expect(left).toEqual([expect.stringMatching(/^the identity: .*403/)]);
  });
});

/**
 * The watcher as a run starts it: a process of the built CLI (`npm run build` first), fed by a process that is then
 * SIGKILLed; an HTTP server stands for the apiserver and counts the DELETEs that reach it.
 */
describe('the exit watch of a process killed with SIGKILL', () => {
  let dir: string;
  let server: Server;
  const deletes: { url: string; body: string }[] = [];
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kr-exit-watch-'));
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        if (req.method === 'DELETE') deletes.push({ url: req.url!, body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"Status","status":"Success"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    writeFileSync(
      join(dir, 'kubeconfig'),
      `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: lab, context: {cluster: c, user: u}}]
current-context: lab
`,
    );
  });
  afterEach(() => {
    child?.kill('SIGKILL');
    deletes.length = 0;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  /** A process that registers ROLE under key `a` (and forgets it when told), says `held`, and waits to be killed. */
  function holder(run: string, forget: boolean): Promise<ChildProcess> {
    const script = `
      import { ExitWatch } from ${JSON.stringify(new URL('../../dist/engine/exit-watch.js', import.meta.url).href)};
      const w = new ExitWatch({ runId: ${JSON.stringify(run)}, log: { warn: (m) => console.error(m) },
        source: () => ({ kubeconfig: ${JSON.stringify(join(dir, 'kubeconfig'))}, context: 'lab' }),
        logFile: ${JSON.stringify(join(dir, `${run}.log`))} });
      w.add('a', [${JSON.stringify(ROLE)}]);
      ${forget ? "w.forget('a');" : ''}
      setTimeout(() => console.log('held'), 300);
      setInterval(() => {}, 1000);`;
    const c = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    child = c;
    return new Promise((resolve, reject) => {
      c.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve(c));
      c.on('exit', (code) => reject(new Error(`the holder exited (${code})`)));
    });
  }

  it('deletes what the killed process held, with its uid as a precondition, and logs it beside the journal', async () => {
    const c = await holder('killed', false);
    await new Promise((r) => setTimeout(r, 500));
    expect(deletes, 'nothing deleted while the process lives').toEqual([]);
    c.kill('SIGKILL');
    expect(await eventually(() => deletes.length > 0, 15_000), 'a DELETE reached the apiserver').toBe(true);
    expect(deletes.map((d) => d.url)).toEqual([ROLE.path]);
    expect(JSON.parse(deletes[0]!.body)).toMatchObject({ kind: 'DeleteOptions', preconditions: { uid: 'uid-1' } });
    expect(await eventually(() => readFileSync(join(dir, 'killed.log'), 'utf8').includes('deleted'), 5000)).toBe(true);
    expect(readFileSync(join(dir, 'killed.log'), 'utf8')).toContain('exit watch: the identity deleted');
  });

  it('deletes nothing when the process forgot it before it ended', async () => {
    const c = await holder('forgot', true);
    c.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 3000));
    expect(deletes).toEqual([]);
  });
});
