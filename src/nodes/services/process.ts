import { KR_FAIL, script, waitingScript } from './script.js';
import type { ProcessTarget, ServiceManager } from './types.js';

const vars = (t: ProcessTarget) => ({ dir: t.dir });

/** `kr_status`: the lab's own `status` script: 0 running, 3 stopped, anything else an error. */
const KR_STATUS = `kr_status() {
  "$dir/status" >/dev/null 2>&1
}
kr_stopped() {
  kr_status
  [ $? -eq 3 ]
}
kr_healthy() {
  "$dir/health" >/dev/null 2>&1
}`;

/**
 * The lab's processes. Each service directory describes itself: `start` and `stop` (idempotent), `status`
 * (0 running, 3 stopped), `health` (0 healthy), `pid`, `run`, `log`.
 */
export const processManager: ServiceManager<ProcessTarget> = {
  kind: 'process',

  preflight: (t) =>
    script(
      `process preflight ${t.service}`,
      vars(t),
      KR_FAIL,
      '[ -d "$dir" ] || kr_fail "no lab service directory $dir"',
      'for s in start stop status health; do',
      '  [ -x "$dir/$s" ] || kr_fail "lab service $dir has no executable $s script"',
      'done',
    ),

  status: (t) =>
    script(
      `process status ${t.service}`,
      vars(t),
      KR_STATUS,
      'kr_status',
      'rc=$?',
      'case $rc in',
      '  0) echo running ;;',
      '  3) echo stopped ;;',
      '  *) echo "$dir/status failed (exit $rc)" >&2 ;;',
      'esac',
      'exit "$rc"',
    ),

  pid: (t) =>
    script(
      `process pid ${t.service}`,
      vars(t),
      KR_STATUS,
      'kr_status || exit 3',
      'pid=$(cat "$dir/pid" 2>/dev/null)',
      'case $pid in "" | *[!0-9]*) exit 3 ;; esac',
      'echo "$pid"',
    ),

  stop: (t, timeoutS) =>
    waitingScript(
      `process stop ${t.service}`,
      vars(t),
      timeoutS,
      KR_STATUS,
      '"$dir/stop" || kr_fail "$dir/stop failed"',
      'kr_wait "$wait_s" kr_stopped || kr_not_yet "$dir still running $wait_s s after stop"',
      'echo "stopped $dir"',
    ),

  start: (t, timeoutS) =>
    waitingScript(
      `process start ${t.service}`,
      vars(t),
      timeoutS,
      KR_STATUS,
      // a process still exiting (a stop interrupted half-way) reads running to `start`, which then does nothing:
      // while waiting, start it again whenever it reads stopped
      'kr_up() { kr_healthy && return 0; kr_status || "$dir/start" >/dev/null 2>&1; return 1; }',
      'if ! kr_healthy; then "$dir/start" || kr_fail "$dir/start failed"; fi',
      'kr_wait "$wait_s" kr_up || kr_not_yet "$dir not healthy $wait_s s after start"',
      'echo "started $dir"',
    ),
};
