import { KR_FAIL, KR_HTTP_OK, KR_IS_ROOT, script, waitingScript } from './script.js';
import type { ServiceManager, SystemdTarget } from './types.js';

const vars = (t: SystemdTarget) => ({ unit: t.unit, health_url: t.healthUrl ?? '' });

/** systemd units: kubelet on kubeadm nodes, `k3s` (server) and `k3s-agent` on k3s nodes. */
export const systemd: ServiceManager<SystemdTarget> = {
  kind: 'systemd',

  preflight: (t) =>
    script(
      `systemd preflight ${t.service}`,
      vars(t),
      KR_FAIL,
      KR_IS_ROOT,
      'command -v systemctl >/dev/null 2>&1 || kr_fail "systemctl not found: this node does not run systemd"',
      'kr_is_root || kr_fail "stopping $unit needs root (run as root, or set transport.sudo in the inventory)"',
      'systemctl cat "$unit" >/dev/null 2>&1 || kr_fail "systemd unit $unit not found"',
    ),

  status: (t) =>
    script(
      `systemd status ${t.service}`,
      vars(t),
      'case $(systemctl is-active "$unit" 2>/dev/null) in',
      '  active | activating | reloading) echo running; exit 0 ;;',
      'esac',
      'echo stopped',
      'exit 3',
    ),

  pid: (t) =>
    script(
      `systemd pid ${t.service}`,
      vars(t),
      'pid=$(systemctl show -p MainPID "$unit" 2>/dev/null | sed -n "s/^MainPID=//p")',
      'case $pid in "" | 0 | *[!0-9]*) exit 3 ;; esac',
      'echo "$pid"',
    ),

  stop: (t, timeoutS) =>
    waitingScript(
      `systemd stop ${t.service}`,
      vars(t),
      timeoutS,
      'inactive() { ! systemctl is-active --quiet "$unit"; }',
      'systemctl stop "$unit" || kr_fail "systemctl stop $unit failed"',
      'kr_wait "$wait_s" inactive || kr_not_yet "$unit still active after $wait_s s"',
      'echo "stopped $unit"',
    ),

  start: (t, timeoutS) =>
    waitingScript(
      `systemd start ${t.service}`,
      vars(t),
      timeoutS,
      KR_HTTP_OK,
      'healthy() { systemctl is-active --quiet "$unit" && { [ -z "$health_url" ] || kr_http_ok "$health_url"; }; }',
      'if ! systemctl is-active --quiet "$unit"; then systemctl start "$unit" || kr_fail "systemctl start $unit failed"; fi',
      'kr_wait "$wait_s" healthy || kr_not_yet "$unit not healthy after $wait_s s (${health_url:-systemctl is-active})"',
      'echo "started $unit"',
    ),
};
