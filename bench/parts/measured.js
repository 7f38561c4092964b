// A process a benchmark measures (bench/parts/probes-executor.js, bench/baselines/informer): one command per line on
// its stdin (`stats`, `quit`; the executor also answers `mem` and `live`), one JSON line per answer on its stdout, whose `ev` is
// the command's name; it prints {"ev":"pod-deleted",...} lines too.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

/** A measured process: sends commands, collects its `pod-deleted` events and answers to `stats`. */
export function measured(name, cmd, args) {
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const deleted = new Map();
  const waiting = { stats: [], mem: [], live: [] };
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      return;
    }
    if (m.ev === 'pod-deleted') {
      if (!deleted.has(m.name)) deleted.set(m.name, m.at);
    } else waiting[m.ev]?.shift()?.(m);
  });
  const exited = new Promise((r) => child.on('exit', r));
  const ask = (cmd) =>
    new Promise((resolve, reject) => {
      waiting[cmd].push(resolve);
      child.stdin.write(`${cmd}\n`);
      exited.then(() => reject(new Error(`${name} exited`)));
    });
  return {
    name,
    deleted,
    pid: child.pid,
    stats: () => ask('stats'),
    mem: () => ask('mem'),
    live: () => ask('live'),
    async quit() {
      child.stdin.write('quit\n');
      // a CPU profile asked for is written as it exits
      await Promise.race([exited, sleep(60_000)]);
      child.kill('SIGKILL');
    },
  };
}
