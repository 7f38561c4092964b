/**
 * The kubelet simulators of a group of lab nodes, in one process:
 * `node dist/lab/sim/kubelet-sim.js --group=<dir>/group.json` (a JSON array of the nodes' config.json paths).
 * Run by the lab's `kubelet-sims/<group>` service in the host's network namespace; each node reaches the apiserver
 * through the forwarder its own `kubelet` service runs inside the node's namespace. SIGTERM stops it and leaves the
 * simulated containers running, as stopping a real kubelet does.
 */
import { readFile } from 'node:fs/promises';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import { lineLogger, runKubeletSims } from './run.js';
import type { KubeletSimFile } from './types.js';

const arg = process.argv.slice(2).find((a) => a.startsWith('--group='));
if (!arg) {
  process.stderr.write('usage: kubelet-sim.js --group=FILE\n');
  process.exit(2);
}
const log = lineLogger('kubelet-sims');
try {
  const files = JSON.parse(await readFile(arg.slice('--group='.length), 'utf8')) as string[];
  const cfgs = await Promise.all(files.map(async (f) => JSON.parse(await readFile(f, 'utf8')) as KubeletSimFile));
  const stop = new AbortController();
  // the shared timers are unref'd: this keeps the process up while every node is cut off and only waits
  const keepAlive = setInterval(() => {}, 1 << 30);
  for (const sig of ['SIGTERM', 'SIGINT'] as const)
    process.once(sig, () => {
      log.info(`${sig}: stopping ${cfgs.length} node(s) (containers keep running)`);
      stop.abort();
      clearInterval(keepAlive);
      // a request still in flight is not waited for
      realClock.setTimer(2000, () => process.exit(0));
    });
  log.info(`simulating ${cfgs.length} node(s): ${cfgs.map((c) => c.name).join(', ')}`);
  await runKubeletSims(cfgs, stop.signal, (node) => lineLogger(`kubelet-sim ${node}`));
} catch (e) {
  log.error(messageOf(e));
  process.exit(1);
}
