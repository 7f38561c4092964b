import { readFileSync } from 'node:fs';
import { eventually } from './wait.js';

/** Whether a process is still there (a zombie waiting to be reaped counts as gone). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
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
