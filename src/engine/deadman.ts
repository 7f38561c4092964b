import { randomBytes } from 'node:crypto';
import { shq } from '../core/shell.js';

/**
 * The node-side dead-man: before a fault is applied, its node gets the fault's revert script and a watcher
 * that runs it when the executor's keepalive is older than `faultTtl`. The executor touches the keepalive
 * while it runs and removes the whole directory on an explicit revert (disarm). Everything here is POSIX sh
 * (dash), and every value is quoted.
 *
 * Layout on the node: /var/lib/kube-runbook/deadman/<runId>/<faultId>/{revert.sh, keepalive, watch.sh, watcher.pid}
 * When it fires, the directory is renamed to <faultId>.fired (with revert.log and exit) so a later disarm or
 * keepalive cannot race with it; the disarm (explicit revert or `recover`) removes that record.
 * Arming fails (and the fault is not applied) unless the watcher is confirmed running: the systemd unit active, or
 * the detached watcher's pid running this fault's watch.sh.
 */
export const DEADMAN_ROOT = '/var/lib/kube-runbook/deadman';

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
  root?: string;
}

/** The watcher: polls the keepalive's age each second, fires once, exits when disarmed. */
const WATCH = `d=$1; ttl=$2
while [ -d "$d" ]; do
  now=$(date +%s)
  last=$(stat -c %Y "$d/keepalive" 2>/dev/null || echo 0)
  if [ $((now - last)) -ge "$ttl" ]; then
    if mv "$d" "$d.fired" 2>/dev/null; then
      sh "$d.fired/revert.sh" >"$d.fired/revert.log" 2>&1
      echo $? >"$d.fired/exit"
    fi
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

export function armScript(o: ArmOptions): string {
  const dir = deadmanDir(o.runId, o.faultId, o.root);
  const ttl = Math.max(1, Math.ceil(o.ttlMs / 1000));
  const rv = heredoc(o.revert);
  const w = heredoc(WATCH);
  const unit = `kube-runbook-deadman-${o.runId}-${o.faultId}`.replace(/[^A-Za-z0-9:_.-]/g, '-');
  const systemd = o.allowSystemd
    ? `if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  if systemd-run --quiet --collect --unit=${shq(unit)} sh "$d/watch.sh" "$d" ${ttl}; then
    echo systemd >"$d/watcher"
    if systemctl is-active --quiet ${shq(`${unit}.service`)}; then exit 0; fi
    echo "the dead-man's unit ${unit}.service is not active" >&2; rm -rf "$d"; exit 1
  fi
fi
`
    : '';
  return `set -eu
umask 077
d=${shq(dir)}
mkdir -p "$d"
cat >"$d/revert.sh" ${rv.open}
${o.revert}
${rv.close}
cat >"$d/watch.sh" ${w.open}
${WATCH}${w.close}
touch "$d/keepalive"
${systemd}setsid sh "$d/watch.sh" "$d" ${ttl} </dev/null >/dev/null 2>&1 &
echo $! >"$d/watcher.pid"
echo detached >"$d/watcher"
# confirmed alive, and ours: the process of that pid runs this fault's watch.sh (given up to 3 s to start)
i=0
until tr '\\000' ' ' <"/proc/$(cat "$d/watcher.pid")/cmdline" 2>/dev/null | grep -qF "$d/watch.sh"; do
  i=$((i + 1))
  if [ "$i" -ge 30 ]; then echo "the dead-man's watcher did not start" >&2; rm -rf "$d"; exit 1; fi
  sleep 0.1
done
`;
}

/** Touches the keepalive of every fault of the run armed on this node. */
export function keepaliveScript(runId: string, root = DEADMAN_ROOT): string {
  const runDir = `${root}/${checkId('run id', runId)}`;
  return `for k in ${shq(runDir)}/*/keepalive; do [ -e "$k" ] && touch "$k"; done; exit 0
`;
}

/**
 * Removes a fault's dead-man; the watcher sees its directory gone and exits. When the dead-man had already fired,
 * prints `fired <exit code of the revert>` and removes that record too. Idempotent.
 */
export function disarmScript(runId: string, faultId: string, root = DEADMAN_ROOT): string {
  const dir = deadmanDir(runId, faultId, root);
  const unit = `kube-runbook-deadman-${runId}-${faultId}`.replace(/[^A-Za-z0-9:_.-]/g, '-');
  return `d=${shq(dir)}
# only our watcher: after a reboot the pid may be another process's
if [ -f "$d/watcher.pid" ]; then
  p=$(cat "$d/watcher.pid")
  if tr '\\000' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$d/watch.sh"; then kill "$p" 2>/dev/null || true; fi
fi
if [ "$(cat "$d/watcher" 2>/dev/null)" = systemd ]; then systemctl stop ${shq(`${unit}.service`)} 2>/dev/null || true; fi
if [ -d "$d.fired" ]; then echo "fired $(cat "$d.fired/exit" 2>/dev/null)"; fi
rm -rf "$d" "$d.fired"
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
