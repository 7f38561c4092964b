import { readFileSync } from 'node:fs';

/** Whether a process is still there (a zombie waiting to be reaped counts as gone). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Polls `check` every 50ms until it holds or `tries` run out; returns whether it held. */
export async function eventually(check: () => boolean, tries = 200): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

/** The pids listed one per line in a file, once it has `count` of them. */
export async function pidsIn(file: string, count: number): Promise<number[]> {
  let pids: number[] = [];
  await eventually(() => {
    try {
      pids = readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      pids = [];
    }
    return pids.length >= count;
  });
  if (pids.length < count) throw new Error(`${file} never listed ${count} pids`);
  return pids;
}
