/**
 * The kubelet simulator of one lab node: `node dist/lab/kubelet-sim.js --config=<dir>/config.json`.
 * Run by the node's `kubelet` service inside its network namespace. SIGTERM stops it and leaves its
 * simulated containers running, as stopping a real kubelet does.
 */
import { readFile } from 'node:fs/promises';
import { realClock } from '../../core/clock.js';
import { messageOf } from '../../core/errors.js';
import { lineLogger, runKubeletSim } from './run.js';
import type { KubeletSimFile } from './types.js';

const arg = process.argv.slice(2).find((a) => a.startsWith('--config='));
if (!arg) {
  process.stderr.write('usage: kubelet-sim.js --config=FILE\n');
  process.exit(2);
}
const cfg = JSON.parse(await readFile(arg.slice('--config='.length), 'utf8')) as KubeletSimFile;
const log = lineLogger(`kubelet-sim ${cfg.name}`);
const stop = new AbortController();
for (const sig of ['SIGTERM', 'SIGINT'] as const)
  process.once(sig, () => {
    log.info(`${sig}: stopping (containers keep running)`);
    stop.abort();
    // a request still in flight is not waited for
    realClock.setTimer(2000, () => process.exit(0));
  });
try {
  await runKubeletSim(cfg, stop.signal, log);
} catch (e) {
  log.error(messageOf(e));
  process.exit(1);
}
