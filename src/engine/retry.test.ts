import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import runCommand from '../actions/run-command.js';
import { KrError } from '../core/errors.js';
import { ApiStatusError } from '../kube/source.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { type ExecCall, type FakeHandler, resetFirst } from '../testing/fake-nodes.js';
import type { RunEvent } from './events.js';
import { Journal, readJournal } from '../journal/journal.js';
import { transientFailure } from './retry.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-retry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let runs = 0;

const UNDO = 'rm -f /tmp/kr-fault';
const isUndo = (c: ExecCall) => c.script === UNDO;
/** Every script succeeds (and preflight's echo echoes), unless `code` says otherwise for the revert. */
const ok =
  (undoCode = 0): FakeHandler =>
  ({ script }) => ({
    code: isUndo({ script } as ExecCall) ? undoCode : 0,
    stdout: script.includes('kube-runbook-ok') ? 'kube-runbook-ok\n' : '',
    stderr: undoCode ? 'rm: cannot remove' : '',
  });

/** A step of run-command on these nodes whose revert is UNDO. */
const fault = (...nodes: string[]) => ({
  action: 'run-command',
  with: { nodes: { names: nodes }, apply: 'touch /tmp/kr-fault', revert: UNDO },
});

/** A run of these steps, started, journaled to a file of its own. */
async function startRun(steps: object[]) {
  const journal = new Journal(join(dir, `run-${++runs}.jsonl`));
  const h = await startTestRun({ runbook: baseRunbook({ steps }), actions: [runCommand], probes: [], journal });
  return { ...h, journalFile: journal.file };
}

/** A run of run-command on node-1 and node-2 whose revert is UNDO; `then` is one more step (a failing one makes the run fail). */
async function run(handler: FakeHandler, then: object = { wait: '10s' }) {
  const h = await startRun([fault('node-1', 'node-2'), then]);
  h.nodes.handler = handler;
  await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'), 30 * 60_000);
  return { ...h, result: await h.handle.result, journal: readJournal(h.journalFile) };
}

const of = <T extends RunEvent['type']>(events: RunEvent[], type: T) =>
  events.filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);

describe('transientFailure', () => {
  it("takes a transport's verdict, the cluster's for apiserver errors, and calls everything else permanent", () => {
    expect(transientFailure(new KrError('NODE_UNREACHABLE', 'reset', { transient: 'connection reset' }))).toBe('connection reset');
    expect(transientFailure(new KrError('COMMAND_FAILED', 'exit 1'))).toBeUndefined();
    expect(transientFailure(new ApiStatusError(503, 'unavailable'))).toBe('apiserver 503');
    expect(transientFailure(new ApiStatusError(409, 'conflict'), { idempotentWrite: true })).toBe('conflict');
    expect(transientFailure(new ApiStatusError(422, 'invalid'))).toBeUndefined();
    expect(
      transientFailure(new Error('watch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })),
    ).toBe('connection reset');
    expect(transientFailure('connection reset')).toBeUndefined();
  });

  it('tries a revert again after a script timeout, a 500 or 502 and a health wait that has not succeeded yet; not after 403, 404 or a bad value', () => {
    const revert = { safeToRepeat: true };
    expect(transientFailure(new KrError('EXEC_TIMEOUT', 'did not finish within 30s'), revert)).toBe('script timeout');
    expect(transientFailure(new KrError('EXEC_TIMEOUT', 'did not finish within 30s'))).toBeUndefined();
    expect(transientFailure(new ApiStatusError(500, 'internal'), revert)).toBe('apiserver 500');
    expect(transientFailure(new ApiStatusError(502, 'bad gateway'), revert)).toBe('apiserver 502');
    expect(transientFailure(new KrError('SERVICE_RESTART_FAILED', 'not healthy 60 s later', { transient: 'health wait' }), revert)).toBe(
      'health wait',
    );
    for (const e of [
      new ApiStatusError(403, 'forbidden'),
      new ApiStatusError(404, 'not found'),
      new KrError('BAD_PARAMS', 'with.timeout: expected a duration'),
    ])
      expect(transientFailure(e, revert)).toBeUndefined();
  });
});

describe('run: reverts retried on transient failures', () => {
  it('a revert that meets connection resets goes through on a later attempt: the run passes (exit 0) and the journal lists the attempts', async () => {
    const h = await run(resetFirst(2, isUndo, ok()));
    expect(h.result).toMatchObject({ status: 'passed', exitCode: 0, remaining: [] });
    expect(
      h.nodes.calls
        .filter(isUndo)
        .map((c) => c.node)
        .sort(),
    ).toEqual(['node-1', 'node-1', 'node-1', 'node-2', 'node-2', 'node-2']);
    for (const f of h.journal.faults) {
      expect(f.reverted).toBe(true);
      expect(f.attempts.map((a) => [a.op, a.attempt, a.transient, a.retryInMs! > 0])).toEqual([
        ['revert', 1, 'connection reset', true],
        ['revert', 2, 'connection reset', true],
      ]);
      expect(f.attempts[0]!.error).toContain('Connection reset by peer');
    }
    const reverted = of(h.events, 'fault-reverted');
    expect(reverted.map((e) => [e.fault.node, e.attempts, e.retried])).toEqual(
      expect.arrayContaining([
        ['node-1', 3, ['connection reset', 'connection reset']],
        ['node-2', 3, ['connection reset', 'connection reset']],
      ]),
    );
    expect(of(h.events, 'attempt').filter((e) => e.op === 'revert')).toHaveLength(4);
  });

  it('a run whose step failed still exits 1, not 4, when its reverts go through after resets', async () => {
    const failing = await run(
      resetFirst(3, isUndo, ({ script }) =>
        script === 'false-step' ? { code: 1, stdout: '', stderr: 'no' } : ok()({ script } as ExecCall),
      ),
      {
        action: 'run-command',
        with: { nodes: { names: ['node-3'] }, apply: 'false-step', revert: 'true' },
      },
    );
    expect(failing.result).toMatchObject({ status: 'failed', exitCode: 1, remaining: [] });
    expect(
      of(failing.events, 'fault-reverted')
        .filter((e) => e.fault.node !== 'node-3')
        .map((e) => e.attempts),
    ).toEqual([4, 4]);
  });

  it('a permanent failure stops at once: one attempt, the fault left, exit 4', async () => {
    const h = await run(ok(1));
    expect(h.result).toMatchObject({ status: 'rollback-incomplete', exitCode: 4 });
    expect(h.result.remaining.map((f) => f.node).sort()).toEqual(['node-1', 'node-2']);
    expect(h.nodes.calls.filter(isUndo)).toHaveLength(2);
    for (const f of h.journal.faults) {
      expect(f.reverted).toBe(false);
      expect(f.attempts).toEqual([expect.objectContaining({ op: 'revert', attempt: 1, error: expect.stringContaining('exit 1') })]);
      expect(f.attempts[0]!.transient).toBeUndefined();
      expect(f.attempts[0]!.retryInMs).toBeUndefined();
    }
    expect(of(h.events, 'fault-revert-failed').map((e) => [e.attempts, e.retried])).toEqual([
      [1, []],
      [1, []],
    ]);
  });

  it("gives up at the revert's deadline (faultTtl after it starts), leaving the fault: exit 4", async () => {
    const h = await run(resetFirst(Number.MAX_SAFE_INTEGER, isUndo, ok()));
    expect(h.result).toMatchObject({ status: 'rollback-incomplete', exitCode: 4 });
    const start = of(h.events, 'rollback-start')[0]!.at;
    const tries = of(h.events, 'attempt').filter((e) => e.op === 'revert' && e.fault?.node === 'node-1');
    expect(tries.length).toBeGreaterThan(5);
    expect(tries.at(-1)!.at).toBeLessThanOrEqual(start + 60_000);
    expect(tries.at(-1)!.retryInMs).toBeUndefined();
    expect(tries.slice(0, -1).every((e) => e.retryInMs! > 0 && e.retryInMs! <= 8000)).toBe(true);
  });

  it('gives each revert its own time: a node unreachable for the whole faultTtl does not shorten the retries of a revert after it', async () => {
    const h = await startRun([fault('node-1'), fault('node-2'), { wait: '10s' }]);
    // node-2 (reverted first: its step came last) never answers; node-1 answers on its 5th attempt
    const undoOn = (node: string) => (c: ExecCall) => isUndo(c) && c.node === node;
    h.nodes.handler = resetFirst(Number.MAX_SAFE_INTEGER, undoOn('node-2'), resetFirst(4, undoOn('node-1'), ok()));
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'), 30 * 60_000);
    const r = await h.handle.result;
    expect(r.remaining.map((f) => f.node)).toEqual(['node-2']);
    const tries = (node: string) => of(h.events, 'attempt').filter((e) => e.op === 'revert' && e.fault?.node === node);
    // node-2 was tried for its whole time (faultTtl 1m from its start) ...
    const start = of(h.events, 'rollback-start')[0]!.at;
    expect(tries('node-2').at(-1)!.at - start).toBeGreaterThan(50_000);
    expect(tries('node-2').at(-1)!.at - start).toBeLessThanOrEqual(60_000);
    // ... and node-1, whose revert started after that, still had its own minute: reverted on attempt 5
    expect(of(h.events, 'fault-reverted').map((e) => [e.fault.node, e.attempts])).toEqual([['node-1', 5]]);
    expect(tries('node-1')[0]!.at - start).toBeGreaterThanOrEqual(60_000);
  });

  it('retries the disarm and the keepalive too, journaling their attempts', async () => {
    const isDisarm = (c: ExecCall) => c.script.includes('rm -rf "$d" "$d.fired"');
    const isKeepalive = (c: ExecCall) => c.script.includes('/keepalive; do');
    const h = await run(resetFirst(1, isDisarm, resetFirst(1, isKeepalive, ok())), { wait: '1m' });
    expect(h.result).toMatchObject({ status: 'passed', exitCode: 0 });
    const ops = h.journal.faults.flatMap((f) => f.attempts.map((a) => `${a.op}:${a.transient}`));
    expect(ops).toEqual(['disarm:connection reset', 'disarm:connection reset']);
    const keepalives = of(h.events, 'attempt').filter((e) => e.op === 'keepalive');
    expect(keepalives.map((e) => [e.node, e.transient])).toEqual(expect.arrayContaining([['node-1', 'connection reset']]));
    expect(h.nodes.calls.filter(isDisarm)).toHaveLength(4);
  });

  it('a second interrupt while a revert waits to be retried stops at once', async () => {
    const h = await startRun([fault('node-1'), { wait: '10m' }]);
    h.nodes.handler = resetFirst(Number.MAX_SAFE_INTEGER, isUndo, ok());
    await h.clock.advance(1000);
    h.handle.interrupt('SIGINT');
    await h.clock.runUntil(() => of(h.events, 'attempt').length >= 2);
    h.handle.interrupt('SIGINT');
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'rollback-incomplete', exitCode: 4, forced: true });
    const made = h.nodes.calls.filter(isUndo).length;
    await h.clock.advance(60_000);
    expect(h.nodes.calls.filter(isUndo)).toHaveLength(made);
  });
});
