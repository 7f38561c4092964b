import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, withLock } from './lock.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

describe('lab lock', () => {
  let dir: string;
  tempDirEach('kr-lock-', (d) => (dir = d));

  it('runs one holder at a time', async () => {
    const file = join(dir, 'a.lock');
    const order: string[] = [];
    await Promise.all(
      ['x', 'y', 'z'].map((n) =>
        withLock(file, async () => {
          order.push(`${n}+`);
          await new Promise((r) => setImmediate(r));
          order.push(`${n}-`);
        }),
      ),
    );
    for (let i = 0; i < order.length; i += 2) expect(order[i]![0]).toBe(order[i + 1]![0]);
    expect(await readFile(file, 'utf8').catch(() => 'released')).toBe('released');
  });

  it('takes over a lock whose holder died (a crashed lab up)', async () => {
    const file = join(dir, 'b.lock');
    await writeFile(file, '999999999');
    expect(alive(999999999)).toBe(false);
    expect(await withLock(file, async () => 'ran')).toBe('ran');
  });

  it('waits for a live holder, then gives up with LAB_BUSY', async () => {
    const file = join(dir, 'c.lock');
    await writeFile(file, String(process.pid));
    await expect(withLock(file, async () => 'ran', { timeoutMs: 300 })).rejects.toThrow(/held by process/);
  });
});
