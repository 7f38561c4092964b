import { KR_FAIL, script } from '../../nodes/services/script.js';
import { shq } from '../../core/shell.js';

/**
 * `kr_cg_do VERSION CODE ARGS…` runs the constant sh text CODE with $1 = the root of the CONTROLLER hierarchy (cgroup
 * v1) or the unified one (v2) and the ARGS after it. Where the hierarchy is not mounted in this mount namespace
 * (`ip netns exec` remounts /sys and hides it), it mounts it in a private mount namespace of its own (unshare -m),
 * which vanishes with it: nothing on the node's own mounts changes. A v1 hierarchy is mounted with every controller
 * it holds (`cpu,cpuacct` where they share one), as the kernel takes it only so.
 */
function cgroupDo(controller: 'blkio' | 'cpu'): string {
  return `kr_cg_mnt() {
  if [ "$1" = 1 ]; then
    awk '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == "${controller}") { print $2; exit } }' /proc/self/mounts
  else
    awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts
  fi
}
kr_cg_do() {
  kr_v=$1
  kr_c=$2
  shift 2
  kr_m=$(kr_cg_mnt "$kr_v")
  if [ -n "$kr_m" ]; then
    sh -c "$kr_c" kr "$kr_m" "$@"
    return
  fi
  command -v unshare >/dev/null 2>&1 || { echo "the cgroup hierarchy is not mounted here, and unshare is missing" >&2; return 1; }
  kr_o=$(awk -F: '$1 != "0" { n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] == "${controller}") { print $2; exit } }' /proc/self/cgroup)
  unshare -m sh -c 'v=$1; o=$2; c=$3; shift 3
if [ "$v" = 1 ]; then mount -t cgroup -o "$o" kr /sys/fs/cgroup; else mount -t cgroup2 kr /sys/fs/cgroup; fi || exit 1
sh -c "$c" kr /sys/fs/cgroup "$@"' kr "$kr_v" "\${kr_o:-${controller}}" "$kr_c" "$@"
}`;
}

/** sh text for `kr_cg_do`: write $3 to the file $2 of the hierarchy rooted at $1. */
export const CG_WRITE = `printf '%s\\n' "$3" >"$1$2"`;
const CG_IS_DIR = `[ -d "$1$2" ]`;

/**
 * A script on the cgroup `$cg` of CONTROLLER's hierarchy (`vars` sets `version` and `cg`, and whatever `body` reads):
 * kr_fail and kr_cg_do, then `onMissing` (sh) where the cgroup is not there, then `body`.
 */
export function cgroupScript(
  controller: 'blkio' | 'cpu',
  purpose: string,
  vars: Record<string, string | number>,
  onMissing: string,
  body: string[],
): string {
  return script(purpose, vars, KR_FAIL, cgroupDo(controller), `kr_cg_do "$version" ${shq(CG_IS_DIR)} "$cg" || ${onMissing}`, ...body);
}
