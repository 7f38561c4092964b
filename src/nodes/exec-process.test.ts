import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { markerExists, markerPath, hostileValues } from '../testing/hostile.js';
import { runProcess, spawnTransient } from './exec-process.js';

const spec = { node: 'n1', transport: 'local' };

describe('runProcess', () => {
  it('times out on the clock it is given, not on the wall clock', async () => {
    const clock = new FakeClock();
    const log = memoryLogger();
    const run = runProcess({ ...spec, argv: ['sh', '-s'], stdin: 'sleep 60\n', timeoutMs: 90_000 }, { clock, log });
    const outcome = run.catch((e: unknown) => e);
    await clock.advance(89_000);
    let settled = false;
    void outcome.then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    await clock.advance(1000);
    expect(await outcome).toMatchObject({ code: 'EXEC_TIMEOUT', message: expect.stringContaining('1m30s') });
    expect(log.lines.map((l) => l.msg)).toEqual(['exec timed out']);
  });

  it('says which program is missing', async () => {
    const run = runProcess({ ...spec, argv: ['krt-no-such-program', '-s'], stdin: '' });
    await expect(run).rejects.toMatchObject({
      code: 'EXEC_SPAWN_FAILED',
      message: 'cannot run the local transport for node "n1": "krt-no-such-program" is not installed or not on PATH',
    });
  });

  it('refuses a timeout that is not positive', async () => {
    for (const timeoutMs of [0, -5, Number.NaN])
      await expect(runProcess({ ...spec, argv: ['true'], stdin: '', timeoutMs })).rejects.toMatchObject({ code: 'EXEC_BAD_TIMEOUT' });
  });

  it('is not bothered by a program that exits without reading its stdin', async () => {
    const r = await runProcess({ ...spec, argv: ['true'], stdin: 'x'.repeat(4 * 1024 * 1024) });
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('hands every word of the argv to the program as it is, running none of it', async () => {
    const marker = markerPath();
    const words = hostileValues(marker);
    const r = await runProcess({ ...spec, argv: ['printf', '%s\\0', ...words], stdin: '' });
    expect(r.code).toBe(0);
    expect(r.stdout.split('\0').slice(0, -1)).toEqual(words);
    expect(markerExists(marker)).toBe(false);
  });

  it('runs the program itself in the end, not a shell around it', async () => {
    const r = await runProcess({ ...spec, argv: ['sh', '-c', 'cat /proc/$PPID/comm; echo $0', 'named'], stdin: '' });
    expect(r.stdout.split('\n')[1]).toBe('named');
    expect(r.stdout.split('\n')[0]).not.toBe('sh');
  });
});

describe('spawnTransient', () => {
  it('calls a machine short of processes or files for a moment transient, anything else permanent', () => {
    for (const errno of ['EAGAIN', 'ENOMEM', 'EMFILE', 'ENFILE']) expect(spawnTransient(errno)).toBe('process start failure');
    for (const errno of ['ENOENT', 'EACCES', 'EPERM', undefined]) expect(spawnTransient(errno)).toBeUndefined();
  });
});
