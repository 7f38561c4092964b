import { shq } from '../core/shell.js';

/** Where the node-side dead-men live on a node (src/engine/deadman.ts), one directory per run and fault. */
export const DEADMAN_ROOT = '/var/lib/kube-runbook/deadman';

const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * Touches the keepalive of every fault of the run armed on this node. The executor runs it over ssh or netns; a
 * node agent runs it itself each time it sees the run's Lease renewed.
 */
export function keepaliveScript(runId: string, root = DEADMAN_ROOT): string {
  if (!RUN_ID.test(runId)) throw new Error(`invalid run id for the dead-man: ${JSON.stringify(runId)}`);
  return `for k in ${shq(`${root}/${runId}`)}/*/keepalive; do [ -e "$k" ] && touch "$k"; done; exit 0
`;
}

/**
 * Fires now the dead-men of the run's faults on this node (never a remediation's: it is undone only when safe), by
 * dating their keepalives back to 1970: each watcher reverts its fault at its next poll (within a second or two).
 * Prints the directory of each one fired. A node agent runs it when a halt is set and its executor has gone silent.
 */
export function fireFaultsScript(runId: string, root = DEADMAN_ROOT): string {
  if (!RUN_ID.test(runId)) throw new Error(`invalid run id for the dead-man: ${JSON.stringify(runId)}`);
  return `for d in ${shq(`${root}/${runId}`)}/*; do
  case $d in *.fired | *.lock) continue ;; esac
  [ "$(cat "$d/on-boot" 2>/dev/null)" = revert ] || continue
  [ -e "$d/keepalive" ] && touch -t 197001020000 "$d/keepalive" && echo "$d"
done; exit 0
`;
}
