import { randomBytes } from 'node:crypto';
import { shq } from '../core/shell.js';
import { BOOT_ROOT } from '../nodes/boot-dir.js';
import { DEADMAN_ROOT, keepaliveScript } from '../nodes/keepalive.js';

/**
 * The node-side dead-man: before a fault is applied, its node gets the fault's revert script and a watcher
 * that runs it when the executor's keepalive is older than `faultTtl`. The executor touches the keepalive
 * while it runs and removes the whole directory on an explicit revert (disarm). Everything here is POSIX sh
 * (dash), and every value is quoted.
 *
 * Layout on the node: /var/lib/kube-runbook/deadman/<runId>/<faultId>/{revert.sh, keepalive, watch.sh, watcher.pid,
 * on-boot} (on-boot: `revert` for a fault, `rewatch` for a remediation; a node agent fires only faults at a halt)
 * When it fires, the directory is renamed to <faultId>.fired (with revert.log and exit) so a later disarm or
 * keepalive cannot race with it; the disarm (explicit revert or `recover`) removes that record.
 * Arming fails (and the fault is not applied) unless the watcher is confirmed running: the systemd unit active, or
 * the detached watcher's pid running this fault's watch.sh.
 */
export { DEADMAN_ROOT, keepaliveScript };

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function checkId(what: string, id: string): string {
  if (!ID.test(id)) throw new Error(`invalid ${what} for the dead-man: ${JSON.stringify(id)}`);
  return id;
}

export const deadmanDir = (runId: string, faultId: string, root = DEADMAN_ROOT): string =>
  `${root}/${checkId('run id', runId)}/${checkId('fault id', faultId)}`;

export interface ArmOptions {
  runId: string;
  faultId: string;
  ttlMs: number;
  /** The action's nodeSideRevert text. */
  revert: string;
  /** Use a transient systemd service where systemd runs (not inside a netns: systemd-run would leave it). */
  allowSystemd: boolean;
  /** The node as named on its disk: its name, or for a lab node its network namespace (a lab's nodes share one disk). */
  node: string;
  /**
   * After a reboot the watcher is gone. `revert`: the boot step reverts the fault at once (whatever was parked or
   * stopped comes back). `rewatch`: it starts the watcher again with the same ttl, for remediations, which must not
   * be undone just because a node rebooted.
   */
  onBoot: 'revert' | 'rewatch';
  /** At most how long the fired revert may run before it is killed; DEADMAN_REVERT_LIMIT_MS by default. */
  revertLimitMs?: number;
  /**
   * How the boot step is registered. `host`: a systemd unit enabled for multi-user.target, else an @reboot entry in
   * /etc/cron.d where a cron daemon runs, else none (the arm prints `boot-hook none`). `dir`: a link in the lab's boot
   * directory, which the lab runs when it boots a node (`kube-runbook-lab reboot`).
   */
  bootHook: 'host' | 'dir';
  root?: string;
  /** For tests: where the `dir` hook goes. */
  bootDir?: string;
}

/**
 * How long after the last keepalive the node saw each of its faults is reverted, at most, beyond `faultTtl` (a
 * remediation: `remediationTtl`): the watcher polls each second and the keepalive's age is counted in whole seconds
 * (up to 2 s), and the revert's first step undoes the fault (the rules deleted, the limits written back, the service
 * started) in well under a second on a node that is not itself stuck. Every dead-man reverts its own fault, whatever
 * the others of the node do. Measured on the lab by test/e2e/actions-deadman.test.ts.
 */
export const DEADMAN_MARGIN_MS = 10_000;

/**
 * At most how long a fired dead-man's revert script may run (beyond the action's `nodeSideWaitMs`) before it is killed
 * (`timeout`, exit 124): the scripts bound their own waits (a health wait, the action's `timeout`), this bounds what
 * could hang anyway (a service manager that does not answer, a lock held by a stuck process).
 */
export const DEADMAN_REVERT_LIMIT_MS = 600_000;

/**
 * The watcher: polls the keepalive's age each second and fires once, then exits; exits when disarmed. Whether to
 * fire is decided again holding the fault's lock (`<dir>.lock`), which the executor's touch before its own revert
 * takes too, so the two never revert one fault at once. The revert itself waits for nothing else: no other fault's
 * dead-man, no node-wide lock (a revert that waits on the control plane, a service's health after its start, must not
 * hold back the revert of the etcd disk throttle that keeps that control plane slow). It runs under `timeout` (`$3`
 * seconds, killed with its process group) where the node has it. Without flock(1) on the node, the lock is skipped.
 * The record: `fired-at` (epoch seconds), `revert.log`, `exit` (its code, 124 when killed by the limit).
 */
const WATCH = `d=$1; ttl=$2; limit=\${3:-0}
stale() { [ $(( $(date +%s) - $(stat -c %Y "$d/keepalive" 2>/dev/null || echo 0) )) -ge "$ttl" ]; }
claim() {
  if command -v flock >/dev/null 2>&1; then
    ( flock -w 30 9 || exit 1; stale && mv "$d" "$d.fired" 2>/dev/null ) 9>"$d.lock"
  else
    stale && mv "$d" "$d.fired" 2>/dev/null
  fi
}
while [ -d "$d" ]; do
  if stale && claim; then
    date +%s >"$d.fired/fired-at"
    case $limit in '' | *[!0-9]*) limit=0 ;; esac
    if [ "$limit" -gt 0 ] && command -v timeout >/dev/null 2>&1; then
      timeout -k 5 "$limit" sh "$d.fired/revert.sh" </dev/null >"$d.fired/revert.log" 2>&1
    else
      sh "$d.fired/revert.sh" </dev/null >"$d.fired/revert.log" 2>&1
    fi
    echo $? >"$d.fired/exit.tmp" && mv -f "$d.fired/exit.tmp" "$d.fired/exit"
    if [ -f "$d.fired/unhook.sh" ]; then sh "$d.fired/unhook.sh" >/dev/null 2>&1; fi
    rm -f "$d.lock"
    exit 0
  fi
  sleep 1
done
`;

function heredoc(body: string): { open: string; close: string } {
  let tag: string;
  do tag = `KR_${randomBytes(8).toString('hex')}`;
  while (body.includes(tag));
  return { open: `<<'${tag}'`, close: tag };
}

/** sh: succeeds when process PID runs this fault's watch.sh (after a reboot a recorded pid may be another process's); arm and disarm both ask. */
const IS_WATCHER = `sh -c 'tr "\\\\000" " " <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$2/watch.sh"' sh`;
const isWatcher = (pid: string) => `${IS_WATCHER} ${pid} "$d"`;

const unitName = (runId: string, faultId: string) => `kube-runbook-deadman-${runId}-${faultId}`.replace(/[^A-Za-z0-9:_.-]/g, '-');

/** A file written by the arm script: `cat >FILE <<'TAG'` … `TAG`. */
function writeFile(file: string, body: string): string {
  const h = heredoc(body);
  return `cat >${file} ${h.open}\n${body.endsWith('\n') ? body : `${body}\n`}${h.close}\n`;
}

/** The systemd unit that runs boot.sh once at boot (the watcher it starts for a remediation is its main process). */
export function bootUnit(runId: string, faultId: string, dir: string): string {
  return `[Unit]
Description=kube-runbook: after a reboot, the dead-man of ${faultId} (run ${runId})
ConditionPathIsDirectory=${dir}
After=local-fs.target network.target

[Service]
Type=simple
ExecStart=/bin/sh ${dir}/boot.sh

[Install]
WantedBy=multi-user.target
`;
}

/** sh text registering boot.sh to run at boot, writing `$d/unhook.sh` that removes the registration, setting `hook` to its kind. */
function bootHookScript(o: ArmOptions, dir: string): string {
  if (o.bootHook === 'dir') {
    const nodeDir = `${o.bootDir ?? BOOT_ROOT}/${checkId('node', o.node)}`;
    const link = `${nodeDir}/${o.runId}--${o.faultId}`;
    return `mkdir -p ${shq(nodeDir)}
ln -sfn "$d/boot.sh" ${shq(link)}
${writeFile('"$d/unhook.sh"', `rm -f ${shq(link)}\nrmdir ${shq(nodeDir)} 2>/dev/null\nexit 0`)}hook=dir
`;
  }
  const unit = `${unitName(o.runId, o.faultId)}-boot.service`;
  const unitFile = `/etc/systemd/system/${unit}`;
  const cronFile = `/etc/cron.d/${unitName(o.runId, o.faultId).replace(/[^A-Za-z0-9_-]/g, '-')}`;
  return `hook=none
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 && [ -d /etc/systemd/system ] && [ -w /etc/systemd/system ]; then
  ${writeFile(shq(unitFile), bootUnit(o.runId, o.faultId, dir))}
  if systemctl daemon-reload && systemctl enable --quiet ${shq(unit)}; then
    hook=systemd
    ${writeFile('"$d/unhook.sh"', `systemctl disable --quiet ${shq(unit)} 2>/dev/null\nrm -f ${shq(unitFile)}\nsystemctl daemon-reload 2>/dev/null\nexit 0`)}
  else
    rm -f ${shq(unitFile)}
  fi
fi
if [ "$hook" = none ] && [ -d /etc/cron.d ] && [ -w /etc/cron.d ] && { pgrep -x cron || pgrep -x crond; } >/dev/null 2>&1; then
  printf '@reboot root /bin/sh %s\\n' "$d/boot.sh" >${shq(cronFile)}
  hook=cron
  ${writeFile('"$d/unhook.sh"', `rm -f ${shq(cronFile)}\nexit 0`)}
fi
`;
}

/**
 * The arm: the dead-man's files, its boot hook, its watcher started and confirmed. It writes nothing to stdout or
 * stderr until the watcher runs (or the arm has been undone): the caller may be gone by then, an executor killed
 * mid-arm closing the pipes, and the first write would end the script with SIGPIPE, leaving a dead-man no watcher
 * keeps.
 */
export function armScript(o: ArmOptions): string {
  const root = o.root ?? DEADMAN_ROOT;
  const dir = deadmanDir(o.runId, o.faultId, root);
  const ttl = Math.max(1, Math.ceil(o.ttlMs / 1000));
  const limit = Math.max(1, Math.ceil((o.revertLimitMs ?? DEADMAN_REVERT_LIMIT_MS) / 1000));
  const unit = unitName(o.runId, o.faultId);
  const boot = `d=${shq(dir)}
[ -d "$d" ] || exit 0
exec sh "$d/watch.sh" "$d" ${o.onBoot === 'revert' ? 0 : ttl} ${limit}`;
  const systemd = o.allowSystemd
    ? `if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  if systemd-run --quiet --collect --unit=${shq(unit)} sh "$d/watch.sh" "$d" ${ttl} ${limit}; then
    echo systemd >"$d/watcher"
    systemctl is-active --quiet ${shq(`${unit}.service`)} || arm_failed "the dead-man's unit ${unit}.service is not active"
    started=systemd
  fi
fi
`
    : '';
  return `set -eu
umask 077
d=${shq(dir)}
arm_failed() {
  if [ -f "$d/unhook.sh" ]; then sh "$d/unhook.sh" >/dev/null 2>&1 || true; fi
  rm -rf "$d"
  echo "$1" >&2
  exit 1
}
mkdir -p "$d"
${writeFile('"$d/revert.sh"', o.revert)}${writeFile('"$d/watch.sh"', WATCH)}${writeFile('"$d/boot.sh"', boot)}touch "$d/keepalive"
echo ${o.onBoot} >"$d/on-boot"
${bootHookScript(o, dir)}started=
${systemd}if [ -z "$started" ]; then
  setsid sh "$d/watch.sh" "$d" ${ttl} ${limit} </dev/null >/dev/null 2>&1 &
  echo $! >"$d/watcher.pid"
  echo detached >"$d/watcher"
  # confirmed alive, and ours: the process of that pid runs this fault's watch.sh (given up to 3 s to start)
  i=0
  until ${isWatcher('"$(cat "$d/watcher.pid")"')}; do
    i=$((i + 1))
    if [ "$i" -ge 30 ]; then arm_failed "the dead-man's watcher did not start"; fi
    sleep 0.1
  done
  ${leavePodCgroup('"$(cat "$d/watcher.pid")"')}
  # still ours once out of the pod's cgroup: a launcher that carried watch.sh's arguments for an instant and then
  # exited (setsid failing to exec it) looked like the watcher to the first check
  ${isWatcher('"$(cat "$d/watcher.pid")"')} || arm_failed "the dead-man's watcher did not start"
fi
echo "boot-hook $hook"
`;
}

/**
 * Moves the process `pid` (a shell word) out of a pod's cgroup into the one the kubelet puts pods under (the parent of
 * `kubepods`) in every hierarchy, when it is in a pod's; else does nothing. A detached dead-man watcher started from a
 * node agent's container does this, as systemd-run would give it a unit of its own: the runtime kills what is left in
 * a container's cgroup when it ends (all of it where the pod shares the host's PID namespace, as the agent's does).
 * `proc` and `cgroupFs` are for tests.
 */
export function leavePodCgroup(pid: string, o: { proc?: string; cgroupFs?: string } = {}): string {
  const cg = shq(o.cgroupFs ?? '/sys/fs/cgroup');
  // quiet when the process is gone, its cgroup file with it: the caller says what became of it
  return `w=${pid}
  ( while IFS=: read -r _ ctl path; do
    case "$path" in */kubepods*) ;; *) continue ;; esac
    for c in ${cg}/"$ctl\${path%%/kubepods*}" ${cg}/"\${ctl#name=}\${path%%/kubepods*}"; do
      if [ -w "$c/cgroup.procs" ] && echo "$w" >"$c/cgroup.procs" 2>/dev/null; then break; fi
    done
  done <${shq(o.proc ?? '/proc')}/"$w/cgroup" ) 2>/dev/null || true`;
}

/**
 * Run before the executor's own revert of a fault: touches its keepalive holding the fault's lock, so the watcher
 * cannot fire during the revert, and prints `armed`; when the dead-man has fired already, waits (up to `waitS`) for
 * its revert to finish and prints `fired <exit>`, so the two reverts never run at once; `absent` otherwise.
 */
export function settleScript(runId: string, faultId: string, waitS: number, root = DEADMAN_ROOT): string {
  const dir = deadmanDir(runId, faultId, root);
  return `d=${shq(dir)}
touch_locked() {
  if command -v flock >/dev/null 2>&1; then ( flock -w 30 9 && [ -d "$d" ] && touch "$d/keepalive" ) 9>"$d.lock"; else [ -d "$d" ] && touch "$d/keepalive"; fi
}
if [ -d "$d" ] && touch_locked 2>/dev/null; then echo armed; exit 0; fi
if [ -d "$d.fired" ]; then
  i=0
  while [ ! -f "$d.fired/exit" ] && [ "$i" -lt ${Math.max(1, Math.ceil(waitS))} ]; do sleep 1; i=$((i + 1)); done
  echo "fired $(cat "$d.fired/exit" 2>/dev/null || echo running)"
  exit 0
fi
echo absent
`;
}

/**
 * Removes a fault's dead-man; the watcher sees its directory gone and exits. When the dead-man had already fired,
 * prints `fired <exit code of the revert>` and removes that record too. Idempotent.
 */
export function disarmScript(runId: string, faultId: string, root = DEADMAN_ROOT): string {
  const dir = deadmanDir(runId, faultId, root);
  const unit = unitName(runId, faultId);
  return `d=${shq(dir)}
# only our watcher: after a reboot the pid may be another process's
if [ -f "$d/watcher.pid" ]; then
  p=$(cat "$d/watcher.pid")
  if ${isWatcher('"$p"')}; then kill "$p" 2>/dev/null || true; fi
fi
if [ "$(cat "$d/watcher" 2>/dev/null)" = systemd ]; then systemctl stop ${shq(`${unit}.service`)} 2>/dev/null || true; fi
for u in "$d/unhook.sh" "$d.fired/unhook.sh"; do if [ -f "$u" ]; then sh "$u" >/dev/null 2>&1 || true; fi; done
if [ -d "$d.fired" ]; then echo "fired $(cat "$d.fired/exit" 2>/dev/null)"; fi
rm -rf "$d" "$d.fired" "$d.lock"
rmdir "$(dirname "$d")" 2>/dev/null || true
exit 0
`;
}

/** Lists what the dead-man of a fault did: `armed`, `fired <exit>` or `absent`. */
export function statusScript(runId: string, faultId: string, root = DEADMAN_ROOT): string {
  const dir = deadmanDir(runId, faultId, root);
  return `d=${shq(dir)}
if [ -d "$d" ]; then echo armed; elif [ -d "$d.fired" ]; then echo "fired $(cat "$d.fired/exit" 2>/dev/null)"; else echo absent; fi
`;
}
