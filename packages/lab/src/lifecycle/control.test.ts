import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { startAndWait } from './control.js';

async function script(dir: string, name: string, body: string): Promise<void> {
  await writeFile(join(dir, name), `#!/bin/sh\n${body}\n`);
  await chmod(join(dir, name), 0o755);
}

describe('startAndWait', () => {
  let dir: string;
  tempDirEach('kr-control-', (d) => (dir = d));

  it('quotes the last lines of the log of a service that exited at start', async () => {
    await script(dir, 'start', 'exit 0');
    await script(dir, 'health', 'exit 1');
    await script(dir, 'status', 'exit 3');
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`);
    await writeFile(
      join(dir, 'log'),
      [...lines, 'err: opening storage failed: lock DB directory: resource temporarily unavailable'].join('\n'),
    );
    const e = (await startAndWait(dir, 5000, realClock).catch((x: unknown) => x)) as KrError;
    expect(e).toBeInstanceOf(KrError);
    expect(e.code).toBe('LAB_START_FAILED');
    expect(e.details[0]).toBe(`${join(dir, 'log')}, last lines:`);
    expect(e.details).toContain('  err: opening storage failed: lock DB directory: resource temporarily unavailable');
    expect(e.details).not.toContain('  line 9');
    expect(e.details).toHaveLength(13);
  });

  it('says so when the service left no log', async () => {
    await script(dir, 'start', 'exit 0');
    await script(dir, 'health', 'exit 1');
    await script(dir, 'status', 'exit 3');
    const e = (await startAndWait(dir, 5000, realClock).catch((x: unknown) => x)) as KrError;
    expect(e.details).toEqual([`${join(dir, 'log')}: no log`]);
  });
});
