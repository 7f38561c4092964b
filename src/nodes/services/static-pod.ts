import { KR_FAIL, KR_HTTP_OK, KR_IS_ROOT, KR_NOT_YET, KR_WAIT, script } from './script.js';
import type { ServiceManager, StaticPodTarget } from './types.js';

const vars = (t: StaticPodTarget) => ({
  manifest: t.manifest,
  parked: t.parked,
  proc: t.process,
  health_scheme: t.health?.scheme ?? '',
  health_port: t.health?.port ?? 0,
  health_path: t.health?.path ?? '',
  port_flag: t.health?.portFlag ?? '',
});

/**
 * `kr_running`: the component's container is running (crictl, when the node has it) or its process is (pgrep on
 * the full command line: process names are cut at 15 characters, `kube-controller-manager` included). A process
 * counts only in this shell's network namespace: static pods use the host's network, and another machine's
 * control plane sharing this kernel's process table (a lab's other nodes, a container's) is not this node's.
 */
const KR_RUNNING = `kr_running() {
  if command -v crictl >/dev/null 2>&1; then
    [ -n "$(crictl ps -q --state running --name "^$proc\\$" 2>/dev/null)" ] && return 0
  fi
  kr_net=$(readlink /proc/$$/ns/net 2>/dev/null)
  for kr_p in $(pgrep -f "^([^ ]*/)?$proc( |\\$)" 2>/dev/null); do
    [ "$(readlink /proc/"$kr_p"/ns/net 2>/dev/null)" = "$kr_net" ] && return 0
  done
  return 1
}`;

/** `kr_healthy`: running, and its health endpoint answers (port taken from the manifest's flag when it sets one). */
const KR_HEALTHY = `kr_healthy() {
  kr_running || return 1
  [ -n "$health_scheme" ] || return 0
  kr_port=$health_port
  if [ -n "$port_flag" ] && [ -f "$manifest" ]; then
    kr_p=$(sed -n "s/.*$port_flag=\\([0-9][0-9]*\\).*/\\1/p" "$manifest" | head -n 1)
    [ -n "$kr_p" ] && kr_port=$kr_p
  fi
  kr_http_ok "$health_scheme://127.0.0.1:$kr_port$health_path"
}`;

/**
 * kubeadm's static pods: stopping parks the manifest in a directory of ours (outside the manifests directory,
 * so the kubelet never reads it) and waits until the container and process are gone; starting puts it back
 * and waits until the component is healthy.
 */
export const staticPod: ServiceManager<StaticPodTarget> = {
  kind: 'static-pod',

  preflight: (t) =>
    script(
      `static-pod preflight ${t.service}`,
      vars(t),
      KR_FAIL,
      KR_IS_ROOT,
      'if [ ! -f "$manifest" ]; then',
      '  [ -f "$parked" ] && kr_fail "$manifest is parked in $parked by an earlier run: run kube-runbook recover, or move it back"',
      '  kr_fail "no static pod manifest $manifest on this node"',
      'fi',
      'command -v crictl >/dev/null 2>&1 || command -v pgrep >/dev/null 2>&1 || kr_fail "neither crictl nor pgrep found"',
      'kr_is_root || [ -w "${manifest%/*}" ] || kr_fail "cannot move files out of ${manifest%/*} (run as root, or set transport.sudo)"',
    ),

  status: (t) =>
    // the kubelet runs whatever manifest is in place, also while the container is between restarts
    script(`static-pod status ${t.service}`, vars(t), 'if [ -f "$manifest" ]; then echo running; exit 0; fi', 'echo stopped', 'exit 3'),

  pid: (t) =>
    script(
      `static-pod pid ${t.service}`,
      vars(t),
      'pid=$(pgrep -n -f "^([^ ]*/)?$proc( |\\$)" 2>/dev/null)',
      '[ -n "$pid" ] || exit 3',
      'echo "$pid"',
    ),

  stop: (t, timeoutS) =>
    script(
      `static-pod stop ${t.service}`,
      { ...vars(t), wait_s: timeoutS },
      KR_FAIL,
      KR_WAIT,
      KR_NOT_YET,
      KR_RUNNING,
      'gone() { ! kr_running; }',
      'if [ -f "$manifest" ]; then',
      '  mkdir -p "${parked%/*}" || kr_fail "cannot create ${parked%/*}"',
      '  mv -f "$manifest" "$parked" || kr_fail "cannot park $manifest in $parked"',
      'fi',
      'kr_wait "$wait_s" gone || kr_not_yet "$proc still running $wait_s s after its manifest was parked in $parked"',
      'echo "parked $manifest in $parked; $proc is gone"',
    ),

  start: (t, timeoutS) =>
    script(
      `static-pod start ${t.service}`,
      { ...vars(t), wait_s: timeoutS },
      KR_FAIL,
      KR_WAIT,
      KR_NOT_YET,
      KR_HTTP_OK,
      KR_RUNNING,
      KR_HEALTHY,
      'if [ -f "$parked" ]; then',
      '  if [ -f "$manifest" ]; then',
      '    echo "$manifest exists (written since it was parked): kept it, left $parked" >&2',
      '  else',
      // a dead-man reverting at the same moment may have moved it first: then the manifest is back, which is the point
      '    mv -f "$parked" "$manifest" 2>/dev/null || [ -f "$manifest" ] || kr_fail "cannot move $parked back to $manifest"',
      '  fi',
      'fi',
      '[ -f "$manifest" ] || kr_fail "no manifest $manifest to start $proc from (and none parked in $parked)"',
      'kr_wait "$wait_s" kr_healthy || kr_not_yet "$proc not healthy $wait_s s after its manifest was put back"',
      'echo "restored $manifest; $proc is healthy"',
    ),
};
