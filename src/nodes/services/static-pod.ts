import { KR_FAIL, KR_HTTP_OK, KR_IS_ROOT, script, waitingScript } from './script.js';
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
 * `kr_pids`: the process ids of this node's component that the kubelet started, the newest last. With crictl, the
 * main process of each running container named `$proc` in a kube-system pod (where only cluster administrators make
 * pods). Without crictl (the lab's nodes), or when it finds none: each process whose program is `$proc` (the command
 * line's first word, in any directory: process names are cut at 15 characters, `kube-controller-manager` included),
 * in this shell's network namespace (static pods use the host's network; another node sharing this kernel, a lab's,
 * has its own), and in a cgroup under the kubelet's `kubepods`, where only the container runtime puts processes. So a
 * user's `/tmp/kube-apiserver`, or a shell whose command line names it, is never taken for the component (starve-cpu
 * would limit its cgroup instead). `KR_PROC_ROOT` stands in for /proc in tests.
 */
const KR_PIDS = `kr_pids() {
  kr_found=
  if command -v crictl >/dev/null 2>&1; then
    for kr_c in $(crictl ps -q --state running --name "^$proc\\$" --label io.kubernetes.pod.namespace=kube-system 2>/dev/null); do
      kr_p=$(crictl inspect "$kr_c" 2>/dev/null | sed -n 's/^ *"pid": *\\([0-9][0-9]*\\),\\{0,1\\} *$/\\1/p' | head -n 1)
      [ -n "$kr_p" ] && echo "$kr_p" && kr_found=1
    done
  fi
  [ -n "$kr_found" ] && return 0
  kr_proc=\${KR_PROC_ROOT:-/proc}
  kr_net=$(readlink "$kr_proc/self/ns/net" 2>/dev/null)
  for kr_p in $(pgrep -f "^([^ ]*/)?$proc( |\\$)" 2>/dev/null); do
    [ "$(readlink "$kr_proc/$kr_p/ns/net" 2>/dev/null)" = "$kr_net" ] || continue
    grep -q '/kubepods[/.]' "$kr_proc/$kr_p/cgroup" 2>/dev/null && echo "$kr_p"
  done
  return 0
}`;

/** `kr_running`: the component runs (kr_pids finds it). */
const KR_RUNNING = `${KR_PIDS}
kr_running() {
  [ -n "$(kr_pids)" ]
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
    script(`static-pod pid ${t.service}`, vars(t), KR_PIDS, 'pid=$(kr_pids | tail -n 1)', '[ -n "$pid" ] || exit 3', 'echo "$pid"'),

  stop: (t, timeoutS) =>
    waitingScript(
      `static-pod stop ${t.service}`,
      vars(t),
      timeoutS,
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
    waitingScript(
      `static-pod start ${t.service}`,
      vars(t),
      timeoutS,
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
