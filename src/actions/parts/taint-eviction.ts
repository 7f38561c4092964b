import { KR_FAIL, KR_HTTP_OK, KR_IS_ROOT, KR_NOT_YET, KR_WAIT, script } from '../../nodes/services/script.js';
import { controlPlaneKubeconfigs, KR_API_GET, waitBeforeActing } from './node-api.js';

/**
 * Node scripts of `disable-taint-eviction`: restart the controller-manager with the taint-eviction controller
 * turned off (`--controllers=...,-taint-eviction-controller`, Kubernetes 1.29+), on 1.36+ the device taint eviction
 * controller with it (`-device-taint-eviction-controller`), and back as it was. Each layout keeps the original where
 * the revert (and the node-side dead-man) finds it without the executor.
 */
export const FLAG = '-taint-eviction-controller';
/** `names.DeviceTaintEvictionController`: a name every controller-manager since 1.33 knows (older ones refuse it). */
export const DEVICE_FLAG = '-device-taint-eviction-controller';
/** What `--controllers` gets appended, as one text: `-taint-eviction-controller[,-device-taint-eviction-controller]`. */
export const exclusionsOf = (device: boolean): string => (device ? `${FLAG},${DEVICE_FLAG}` : FLAG);
export const k3sControllers = (off: string): string => `*,tokencleaner,${off}`;

export type TaintEvictionTarget =
  | { layout: 'kubeadm'; manifest: string; backup: string }
  | { layout: 'k3s'; dropin: string; unit: string }
  | { layout: 'lab'; dir: string };

/** `dir`: kubeadm's directory (the inventory's spec.kubeadm.dir, else /etc/kubernetes). */
export const kubeadmTarget = (dir = '/etc/kubernetes'): TaintEvictionTarget => ({
  layout: 'kubeadm',
  manifest: `${dir}/manifests/kube-controller-manager.yaml`,
  // outside the manifests directory: the kubelet runs every file it finds there
  backup: `${dir}/kube-runbook-parked/kube-controller-manager.yaml.before-disable-taint-eviction`,
});
export const k3sTarget = (): TaintEvictionTarget => ({
  layout: 'k3s',
  dropin: '/etc/rancher/k3s/config.yaml.d/90-kube-runbook-disable-taint-eviction.yaml',
  unit: 'k3s',
});

/**
 * `kr_kcm_args`: the running controller-manager's command line, one argument per line (empty when it does not
 * run; with `$match`, only one whose command line holds it). `kr_kcm_off`: it runs with the taint-eviction controller
 * turned off; `kr_kcm_all_off`: with every exclusion of `$flag` (the device one too on 1.36+); `kr_kcm_on`: it runs
 * with the taint-eviction controller.
 * With `$static_pod` (kubeadm) only the static pod's counts: the process of its container (crictl) or, without crictl,
 * one in a kubepods cgroup (the kubelet started it). Any user can start a process named kube-controller-manager with
 * `--controllers=*,-taint-eviction-controller`; taken for the real one, it would make an apply that changed nothing look
 * done (evictions not frozen) or a revert look done while taint eviction is still off. `KR_PROC_ROOT` stands in for
 * /proc in tests.
 */
const KR_KCM = `kr_kcm_args() {
  kr_proc=\${KR_PROC_ROOT:-/proc}
  kr_net=$(readlink "$kr_proc/self/ns/net" 2>/dev/null)
  kr_ctr=
  if [ -n "$static_pod" ] && command -v crictl >/dev/null 2>&1; then
    for kr_c in $(crictl ps -q --state running --name '^kube-controller-manager$' --label io.kubernetes.pod.namespace=kube-system 2>/dev/null); do
      kr_ctr="$kr_ctr $(crictl inspect "$kr_c" 2>/dev/null | sed -n 's/^ *"pid": *\\([0-9][0-9]*\\),\\{0,1\\} *$/\\1/p' | head -n 1)"
    done
  fi
  for p in $(pgrep -f "kube-controller-manager" 2>/dev/null); do
    # this node's: in this shell's network namespace (a static pod uses the host's), not another's on the same kernel
    [ "$(readlink "$kr_proc/$p/ns/net" 2>/dev/null)" = "$kr_net" ] || continue
    if [ -n "$static_pod" ]; then
      if [ -n "$kr_ctr" ]; then
        case " $kr_ctr " in *" $p "*) ;; *) continue ;; esac
      else
        grep -q '/kubepods[/.]' "$kr_proc/$p/cgroup" 2>/dev/null || continue
      fi
    fi
    a=$(tr '\\000' '\\n' < "$kr_proc/$p/cmdline" 2>/dev/null) || continue
    [ -z "$match" ] || printf '%s\\n' "$a" | grep -qF -- "$match" || continue
    case $(printf '%s\\n' "$a" | head -n 1) in */kube-controller-manager | kube-controller-manager) printf '%s\\n' "$a"; return 0 ;; esac
  done
  return 1
}
kr_kcm_off() {
  kr_kcm_args | grep -q -- '^--controllers=.*,${FLAG}' && kr_kcm_healthy
}
kr_kcm_all_off() {
  kr_kcm_args | grep '^--controllers=' | grep -qF -- ",$flag" && kr_kcm_healthy
}
kr_kcm_on() {
  kr_kcm_args >/dev/null || return 1
  ! kr_kcm_args | grep -q -- '^--controllers=.*,${FLAG}' && kr_kcm_healthy
}`;

/** The controller-manager answers its health endpoint (10257, or the port its command line sets). */
const KR_KCM_HEALTHY = `kr_kcm_healthy() {
  kr_port=$(kr_kcm_args | sed -n 's/^--secure-port=\\([0-9][0-9]*\\)$/\\1/p' | head -n 1)
  kr_http_ok "https://127.0.0.1:\${kr_port:-10257}/healthz"
}`;

/**
 * k3s runs the controller-manager inside the k3s server process: there is no command line of its own to read, so
 * the drop-in tells how it runs, and the unit and the controller-manager's port tell that it is up.
 */
const K3S_KCM = `kr_kcm_args() {
  systemctl is-active --quiet "$unit" || return 1
  [ -f "$dropin" ] && echo "--controllers=$k3s_controllers"
  return 0
}
kr_kcm_healthy() {
  kr_http_ok "https://127.0.0.1:10257/healthz"
}`;

const common = (t: TaintEvictionTarget) => [
  KR_FAIL,
  KR_WAIT,
  KR_NOT_YET,
  KR_HTTP_OK,
  KR_KCM,
  KR_KCM_HEALTHY,
  ...(t.layout === 'k3s' ? [K3S_KCM] : []),
];

/** Read-only: prints `disabled` when it already runs without the taint-eviction controller, else `enabled`. */
export function stateScript(t: TaintEvictionTarget): string {
  return script(
    `disable-taint-eviction state (${t.layout})`,
    vars(t),
    ...common(t),
    'if kr_kcm_off; then echo disabled; else echo enabled; fi',
  );
}

export function preflightScript(t: TaintEvictionTarget): string {
  const body: Record<TaintEvictionTarget['layout'], string[]> = {
    kubeadm: [
      KR_IS_ROOT,
      'kr_is_root || kr_fail "disable-taint-eviction edits $manifest: run as root (or set transport.sudo)"',
      '[ -f "$manifest" ] || { [ -f "$backup" ] && kr_fail "$backup is left from an earlier run: run kube-runbook recover"; kr_fail "no static pod manifest $manifest"; }',
      '[ -f "$backup" ] && kr_fail "$backup is left from an earlier run: run kube-runbook recover, or move it back to $manifest"',
      'grep -q -- "- kube-controller-manager$" "$manifest" || grep -q -- "--controllers=" "$manifest" || kr_fail "$manifest has no kube-controller-manager command to add --controllers to"',
      'command -v awk >/dev/null 2>&1 || kr_fail "awk not found"',
    ],
    k3s: [
      KR_IS_ROOT,
      'kr_is_root || kr_fail "disable-taint-eviction writes $dropin: run as root (or set transport.sudo)"',
      'systemctl cat "$unit" >/dev/null 2>&1 || kr_fail "no systemd unit $unit: disable-taint-eviction runs on k3s servers"',
      '[ -f "$dropin" ] && kr_fail "$dropin is left from an earlier run: run kube-runbook recover"',
    ],
    lab: [
      '[ -x "$dir/stop" ] && [ -x "$dir/start" ] || kr_fail "no lab service directory $dir"',
      '[ -f "$dir/extra-args" ] && kr_fail "$dir/extra-args is left from an earlier run: run kube-runbook recover"',
    ],
  };
  return script(
    `disable-taint-eviction preflight (${t.layout})`,
    vars(t),
    ...common(t),
    ...body[t.layout],
    'kr_kcm_args >/dev/null || kr_fail "kube-controller-manager does not run on this node"',
  );
}

/**
 * Turns the taint-eviction controller off (with `off`, every controller it names: `exclusionsOf`) and waits until
 * the controller-manager runs that way and is healthy.
 */
export function applyScript(t: TaintEvictionTarget, timeoutS: number, off = FLAG): string {
  const body: Record<TaintEvictionTarget['layout'], string[]> = {
    kubeadm: [
      'mkdir -p "${backup%/*}" || kr_fail "cannot create ${backup%/*}"',
      '[ -f "$backup" ] || cp -p "$manifest" "$backup" || kr_fail "cannot keep the original manifest in $backup"',
      // an existing --controllers list gets the exclusion appended; otherwise the flag goes right after the command
      'if grep -q -- "^[[:space:]]*- --controllers=" "$backup"; then',
      '  awk -v flag="$flag" \'/^[[:space:]]*- --controllers=/ && !d { sub(/[[:space:]]*$/, ""); $0 = $0 "," flag; d = 1 } { print }\' "$backup" > "$backup.tmp"',
      'else',
      '  awk -v flag="$flag" \'{ print } /^[[:space:]]*- kube-controller-manager[[:space:]]*$/ && !d { i = $0; sub(/-.*/, "", i); print i "- --controllers=*," flag; d = 1 }\' "$backup" > "$backup.tmp"',
      'fi',
      'grep -q -- ",$flag" "$backup.tmp" || kr_fail "could not add --controllers=...,$flag to $manifest"',
      // same filesystem: the kubelet sees the new manifest at once, whole
      'mv -f "$backup.tmp" "$manifest" || kr_fail "cannot write $manifest"',
    ],
    k3s: [
      'mkdir -p "${dropin%/*}" || kr_fail "cannot create ${dropin%/*}"',
      'printf \'%s\\n\' "# written by kube-runbook disable-taint-eviction; its revert removes it" "kube-controller-manager-arg+:" "  - \\"controllers=$k3s_controllers\\"" > "$dropin.tmp" && mv -f "$dropin.tmp" "$dropin" || kr_fail "cannot write $dropin"',
      'systemctl restart "$unit" || kr_fail "systemctl restart $unit failed"',
    ],
    lab: [
      'printf \'%s\\n\' "--controllers=*,$flag" > "$dir/extra-args.tmp" && mv -f "$dir/extra-args.tmp" "$dir/extra-args" || kr_fail "cannot write $dir/extra-args"',
      '"$dir/stop" || kr_fail "$dir/stop failed"',
      '"$dir/start" || kr_fail "$dir/start failed"',
    ],
  };
  return script(
    `disable-taint-eviction apply (${t.layout})`,
    { ...vars(t, off), flag: off, wait_s: timeoutS },
    ...common(t),
    'if kr_kcm_all_off; then echo "kube-controller-manager already runs with --controllers=...,$flag"; exit 0; fi',
    ...body[t.layout],
    'kr_wait "$wait_s" kr_kcm_all_off || kr_not_yet "kube-controller-manager is not running healthy with --controllers=...,$flag $wait_s s later"',
    'echo "kube-controller-manager runs with --controllers=...,$flag"',
  );
}

/**
 * Puts the original back and waits until the controller-manager runs with taint eviction again and is healthy; `off`
 * is what the apply appended (a manifest whose original is gone loses just that).
 */
export function revertScript(t: TaintEvictionTarget, timeoutS: number, off = FLAG): string {
  const body: Record<TaintEvictionTarget['layout'], string[]> = {
    kubeadm: [
      'if [ -f "$backup" ]; then',
      '  mv -f "$backup" "$manifest" || kr_fail "cannot move $backup back to $manifest"',
      'elif [ -f "$manifest" ] && grep -q -- ",$flag" "$manifest"; then',
      // the original is gone (a concurrent revert put it back and it was edited since, or it was removed by hand)
      '  mkdir -p "${backup%/*}" && sed -e "s/,$flag//" "$manifest" > "$backup.tmp" && mv -f "$backup.tmp" "$manifest" || kr_fail "cannot remove ,$flag from $manifest"',
      'fi',
      'rm -f "$backup.tmp"',
    ],
    k3s: [
      'if [ -f "$dropin" ]; then',
      '  rm -f "$dropin" || kr_fail "cannot remove $dropin"',
      '  systemctl restart "$unit" || kr_fail "systemctl restart $unit failed"',
      'fi',
    ],
    lab: [
      'if [ -f "$dir/extra-args" ] || kr_kcm_args | grep -q -- "^--controllers=.*,$flag"; then',
      '  rm -f "$dir/extra-args"',
      '  "$dir/stop" || kr_fail "$dir/stop failed"',
      '  "$dir/start" || kr_fail "$dir/start failed"',
      'fi',
    ],
  };
  return script(
    `disable-taint-eviction revert (${t.layout})`,
    { ...vars(t, off), flag: off, wait_s: timeoutS },
    ...common(t),
    ...body[t.layout],
    'kr_wait "$wait_s" kr_kcm_on || kr_not_yet "kube-controller-manager is not running healthy with taint eviction $wait_s s later"',
    'echo "kube-controller-manager runs with the taint-eviction controller again"',
  );
}

function vars(t: TaintEvictionTarget, off = FLAG): Record<string, string> {
  switch (t.layout) {
    case 'kubeadm':
      return { manifest: t.manifest, backup: t.backup, match: '', static_pod: '1' };
    case 'k3s':
      return { dropin: t.dropin, unit: t.unit, k3s_controllers: k3sControllers(off), match: '', static_pod: '' };
    case 'lab':
      // several labs may run on one machine: only the controller-manager of this service directory counts
      return { dir: t.dir, match: t.dir, static_pod: '' };
  }
}

/**
 * How long the node-side revert waits, at most, for the nodes to be Ready and free of lifecycle taints before it
 * restores taint eviction anyway: the dead-man fires when the executor has been gone for remediationTtl, and after
 * that nobody else may be left to restore it.
 */
export const NODE_SIDE_WAIT_S = 900;

/** Where a control-plane node keeps a kubeconfig that may list nodes, by layout (after the controller-manager's own). */
function kubeconfigsOf(t: TaintEvictionTarget): string[] {
  return controlPlaneKubeconfigs(
    t.layout,
    t.layout === 'lab' ? t.dir : t.layout === 'kubeadm' ? t.manifest.replace(/\/manifests\/[^/]+$/, '') : undefined,
  );
}

/**
 * `kr_nodes_settled`: reads the nodes with a kubeconfig of this node (the running controller-manager's
 * `--kubeconfig`, then the layout's admin kubeconfigs; `kr_api_get`); 0 when every node's Ready condition is True and
 * none carries the unreachable/not-ready NoExecute taint, 1 when not, 2 when the nodes cannot be read; `$kr_why` says
 * which. The JSON is only searched for those two shapes (the apiserver writes a condition's type before its status,
 * and a taint's key before its effect): no JSON tool is needed on the node.
 */
const KR_NODES_SETTLED = `${KR_API_GET}
kr_nodes_settled() {
  { kr_kcm_args 2>/dev/null | sed -n 's/^--kubeconfig=//p'; printf '%s\n' "$kubeconfigs"; } >"$kr_tmp/kubeconfigs"
  if ! kr_api_get /api/v1/nodes NodeList; then kr_why="the nodes cannot be read (no kubeconfig of this node answered)"; return 2; fi
  kr_nodes=$(grep -o '"type":"Ready","status":"[A-Za-z]*"' "$kr_tmp/body.min" | wc -l)
  kr_notready=$(grep -o '"type":"Ready","status":"[A-Za-z]*"' "$kr_tmp/body.min" | grep -vc '"status":"True"')
  kr_tainted=$(grep -oE '"key":"node\\.kubernetes\\.io/(unreachable|not-ready)",("value":"[^"]*",)?"effect":"NoExecute"' "$kr_tmp/body.min" | wc -l)
  kr_why="$kr_notready of $kr_nodes node(s) not Ready, $kr_tainted unreachable/not-ready NoExecute taint(s)"
  [ "$kr_notready" -eq 0 ] && [ "$kr_tainted" -eq 0 ]
}`;

/**
 * The dead-man's revert: the executor is gone, and nobody checks that the cluster is safe to evict again but this
 * script. Before it restores taint eviction it waits, checking every 5 s, until every node is Ready and no node
 * carries the unreachable/not-ready NoExecute taint (their pods' tolerations count from when those were added:
 * evicting now could delete them at once), as the executor's revert waits for them; after `capS` it restores it
 * anyway and says so. Everything it says goes to the dead-man's revert.log.
 */
export function nodeSideRevertScript(t: TaintEvictionTarget, timeoutS: number, off = FLAG, capS = NODE_SIDE_WAIT_S, everyS = 5): string {
  const revert = revertScript(t, timeoutS, off).split('\n');
  // the revert's own lines after its header (`# kube-runbook: …` and `set -u`)
  return script(
    `disable-taint-eviction node-side revert (${t.layout})`,
    { ...vars(t, off), kubeconfigs: kubeconfigsOf(t).join('\n'), cap_s: capS, every_s: everyS },
    ...common(t),
    KR_NODES_SETTLED,
    ...waitBeforeActing('kr_nodes_settled', 'nodes settled', 'restoring taint eviction'),
    ...revert.slice(2),
  );
}
