// A process a benchmark measures (bench/parts/probes-executor.js, bench/baselines/informer): one command per line on
// its stdin (`stats`, `quit`), one JSON line per answer on its stdout; it prints {"ev":"pod-deleted",...} lines too.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

/** A measured process: sends commands, collects its `pod-deleted` events and answers to `stats`. */
export function measured(name, cmd, args) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const deleted = new Map();
  const waiting = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      return;
    }
    if (m.ev === 'pod-deleted') {
      if (!deleted.has(m.name)) deleted.set(m.name, m.at);
    } else if (m.ev === 'stats') waiting.shift()?.(m);
  });
  const exited = new Promise((r) => child.on('exit', r));
  return {
    name,
    deleted,
    pid: child.pid,
    stats: () =>
      new Promise((resolve, reject) => {
        waiting.push(resolve);
        child.stdin.write('stats\n');
        exited.then(() => reject(new Error(`${name} exited`)));
      }),
    async quit() {
      child.stdin.write('quit\n');
      await Promise.race([exited, sleep(10_000)]);
      child.kill('SIGKILL');
    },
  };
}
