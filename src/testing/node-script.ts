import { spawn } from 'node:child_process';

/**
 * A node script run for real by /bin/sh, with `bin` first on its PATH (stub curl, kubectl, …): what it says so far,
 * and its exit.
 */
export function runNodeScript(script: string, bin: string): { out: () => string; exit: Promise<number | null> } {
  const out: string[] = [];
  const child = spawn('/bin/sh', ['-c', script], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
  child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
  return { out: () => out.join(''), exit: new Promise<number | null>((r) => child.on('exit', r)) };
}

/** Whether `what` comes true within 10 s, looked at every 50 ms (for a script that runs on real time). */
export async function eventually(what: () => boolean): Promise<boolean> {
  for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 50));
  return what();
}
