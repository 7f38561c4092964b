import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';

/** A fresh directory under the system's temporary one for each test (`prefix` starts its name), removed after it. */
export function tempDirEach(prefix: string, set: (dir: string) => void): void {
  let dir = '';
  beforeEach(async () => set((dir = await mkdtemp(join(tmpdir(), prefix)))));
  afterEach(() => rm(dir, { recursive: true, force: true }));
}
