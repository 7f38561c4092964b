import { mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';

/**
 * A lock file holding the owner's pid. A lock whose owner no longer runs (a crashed `lab up`) is taken over.
 */
export async function withLock<T>(file: string, fn: () => Promise<T>, o: { timeoutMs?: number; clock?: Clock } = {}): Promise<T> {
  const clock = o.clock ?? realClock;
  const deadline = clock.now() + (o.timeoutMs ?? 120_000);
  await mkdir(dirname(file), { recursive: true });
  for (;;) {
    try {
      const h = await open(file, 'wx', 0o644);
      await h.writeFile(String(process.pid));
      await h.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const owner = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      // an empty file is a lock being taken right now, unless it has been empty for a while
      const young = !owner && clock.now() - ((await stat(file).catch(() => undefined))?.mtimeMs ?? 0) < 5000;
      if (!young && !alive(owner)) {
        await unlink(file).catch(() => {});
        continue;
      }
      if (clock.now() > deadline) throw new KrError('LAB_BUSY', `${file} is held by process ${owner}; another lab command is running`);
      await clock.sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    await unlink(file).catch(() => {});
  }
}

/** Whether a process with this pid exists (and is not a zombie). */
export function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return true;
}
