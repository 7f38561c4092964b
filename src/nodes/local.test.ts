import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { InventoryNode } from '../inventory/schema.js';
import { localTransport } from './local.js';
import { shq } from '../core/shell.js';
import { echoScript, hostileValues, markerExists, markerPath } from '../testing/hostile.js';
import { alive, pidsIn } from '../testing/procs.js';
import { eventually } from '../testing/wait.js';

const node: InventoryNode = { name: 'here-1', roles: ['worker'] };
const local = localTransport({ killGraceMs: 300 });
const dir = mkdtempSync(join(tmpdir(), 'krt-local-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('local transport', () => {
  it('runs scripts with /bin/sh being dash, as on Debian', async () => {
    const r = await local.exec(node, 'readlink -f /bin/sh; readlink -f /proc/$$/exe');
    expect(r.stdout).toBe('/usr/bin/dash\n/usr/bin/dash\n');
  });

  it('passes hostile values through shq and back byte for byte, running none of them', async () => {
    const marker = markerPath();
    const { script, expected } = echoScript(hostileValues(marker));
    const r = await local.exec(node, script);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(expected);
    expect(r.code).toBe(0);
    expect(markerExists(marker)).toBe(false);
  });

  it('gives hostile input to the script on stdin byte for byte, running none of it', async () => {
    const marker = markerPath();
    const input = hostileValues(marker).join('\n');
    const r = await local.exec(node, 'cat\necho "|the rest of the script ran"', { input });
    expect(r.stdout).toBe(`${input}|the rest of the script ran\n`);
    const counted = await local.exec(node, 'wc -c', { input });
    expect(Number(counted.stdout.trim())).toBe(Buffer.byteLength(input));
    expect(markerExists(marker)).toBe(false);
  });

  it('reports the exit code of the script, and 128+n when a signal ended it', async () => {
    expect((await local.exec(node, 'echo out; echo err >&2; exit 3')).code).toBe(3);
    expect(await local.exec(node, 'echo out; echo err >&2; exit 3')).toEqual({ code: 3, stdout: 'out\n', stderr: 'err\n' });
    expect((await local.exec(node, 'kill -KILL $$')).code).toBe(137);
  });

  it('kills a script that runs past its timeout, with its children, and says which node and limit', async () => {
    const pids = join(dir, 'timeout.pids');
    const marker = markerPath();
    const run = local.exec(node, `sleep 60 & echo $! > ${shq(pids)}\necho $$ >> ${shq(pids)}\nsleep 60\ntouch ${shq(marker)}`, {
      timeoutMs: 2000,
    });
    await expect(run).rejects.toMatchObject({ code: 'EXEC_TIMEOUT', message: expect.stringMatching(/"here-1".*2s/) });
    for (const pid of await pidsIn(pids, 2)) expect(await eventually(() => !alive(pid))).toBe(true);
    expect(markerExists(marker)).toBe(false);
  });

  it('kills a script that ignores SIGTERM once the grace is over', async () => {
    const pids = join(dir, 'stubborn.pids');
    const run = local.exec(node, `trap '' TERM\nsleep 60 & echo $! > ${shq(pids)}\nwait`, { timeoutMs: 1500 });
    await expect(run).rejects.toMatchObject({ code: 'EXEC_TIMEOUT' });
    const [pid] = await pidsIn(pids, 1);
    expect(await eventually(() => !alive(pid!))).toBe(true);
  });

  it('stops the whole process tree when the signal aborts', async () => {
    const pids = join(dir, 'abort.pids');
    const ac = new AbortController();
    const run = local.exec(node, `sleep 60 & echo $! > ${shq(pids)}\n(sleep 60; true) & echo $! >> ${shq(pids)}\nwait`, {
      signal: ac.signal,
    });
    const started = await pidsIn(pids, 2);
    ac.abort(new Error('operator pressed Ctrl-C'));
    await expect(run).rejects.toMatchObject({ code: 'EXEC_ABORTED', exit: 130 });
    for (const pid of started) expect(await eventually(() => !alive(pid))).toBe(true);
  });

  it('does not start a script when the signal has already aborted', async () => {
    const marker = markerPath();
    const run = local.exec(node, `touch ${shq(marker)}`, { signal: AbortSignal.abort() });
    await expect(run).rejects.toMatchObject({ code: 'EXEC_ABORTED' });
    expect(markerExists(marker)).toBe(false);
  });

  it('returns when the script exits, leaving a background child that still holds stdout running', async () => {
    const pids = join(dir, 'daemon.pids');
    const r = await local.exec(node, `sleep 60 & echo $! > ${shq(pids)}\necho started`);
    expect(r).toEqual({ code: 0, stdout: 'started\n', stderr: '' });
    const [pid] = await pidsIn(pids, 1);
    expect(alive(pid!)).toBe(true);
    process.kill(pid!, 'SIGKILL');
  });

  it('keeps at most maxOutputBytes of each stream and says how much it dropped', async () => {
    const small = localTransport({ maxOutputBytes: 1000 });
    const r = await small.exec(node, "head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2");
    expect(r.stdout).toBe(`${'a'.repeat(1000)}\n[kube-runbook: 4000 more bytes of output dropped]\n`);
    expect(r.stderr).toBe(`${'b'.repeat(1000)}\n[kube-runbook: 2000 more bytes of output dropped]\n`);
  });

  it('carries a large input and output whole', async () => {
    const input = 'x'.repeat(3 * 1024 * 1024 - 1) + '\n';
    const big = localTransport({ maxOutputBytes: 4 * 1024 * 1024 });
    const r = await big.exec(node, 'cat', { input });
    expect(r.stdout.length).toBe(input.length);
    expect(r.stdout === input).toBe(true);
  });
});
