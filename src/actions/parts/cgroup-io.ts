import { shq } from '../../core/shell.js';
import { CG_WRITE as WRITE, cgroupScript } from './cgroup-mount.js';

/** The four limits, named as in cgroup v2's io.max. Values are decimal strings, or `max` for no limit. */
export const IO_KEYS = ['rbps', 'wbps', 'riops', 'wiops'] as const;
export type IoKey = (typeof IO_KEYS)[number];
export type IoLimits = Record<IoKey, string>;

/** cgroup v1 blkio files, by io.max key. */
const V1_FILE: Record<IoKey, string> = {
  rbps: 'blkio.throttle.read_bps_device',
  wbps: 'blkio.throttle.write_bps_device',
  riops: 'blkio.throttle.read_iops_device',
  wiops: 'blkio.throttle.write_iops_device',
};

/** Where the disk of a process's cgroup is throttled; plain JSON. */
export type IoTarget = {
  /** 1: blkio.throttle.* (cgroup v1); 2: io.max (unified). */
  version: 1 | 2;
  /** The cgroup path from /proc/<pid>/cgroup, relative to the hierarchy's root. */
  cgroup: string;
  /** MAJ:MIN of the whole disk (throttling works on disks, not partitions). */
  device: string;
};

const READ = `cat "$1$2" 2>/dev/null`;

const vars = (t: IoTarget) => ({ version: t.version, cg: t.cgroup, dev: t.device });

/** Read-only: prints `key=value` for each of the four limits now set on the device (`max` when none). */
export function readLimitsScript(t: IoTarget): string {
  const body =
    t.version === 2
      ? [
          `line=$(kr_cg_do "$version" ${shq(READ)} "$cg/io.max" | grep "^$dev ")`,
          `for k in ${IO_KEYS.join(' ')}; do`,
          '  v=$(printf "%s\\n" "$line" | tr " " "\\n" | sed -n "s/^$k=//p")',
          '  echo "$k=${v:-max}"',
          'done',
        ]
      : IO_KEYS.flatMap((k) => [
          `v=$(kr_cg_do "$version" ${shq(READ)} "$cg/${V1_FILE[k]}" | sed -n "s/^$dev //p")`,
          `echo "${k}=\${v:-max}"`,
        ]);
  return cgroupScript('blkio', 'throttle-etcd-disk read limits', vars(t), 'kr_fail "no cgroup $cg"', body);
}

/**
 * Sets `limits` (only the keys given; `max` removes a limit) on the device in the cgroup. With `missingOk`, a
 * cgroup that is gone (its process ended) is not an error: there is nothing left to undo.
 */
export function writeLimitsScript(purpose: string, t: IoTarget, limits: Partial<IoLimits>, missingOk: boolean): string {
  const keys = IO_KEYS.filter((k) => limits[k] !== undefined);
  for (const k of keys)
    if (!/^(?:\d+|max)$/.test(limits[k]!)) throw new Error(`an io limit is a number or max, not ${JSON.stringify(limits[k])}`);
  const writes =
    t.version === 2
      ? [
          `kr_cg_do "$version" ${shq(WRITE)} "$cg/io.max" "$dev ${keys.map((k) => `${k}=${limits[k]}`).join(' ')}" || kr_fail "cannot write $cg/io.max"`,
        ]
      : keys.map(
          (k) =>
            `kr_cg_do "$version" ${shq(WRITE)} "$cg/${V1_FILE[k]}" "$dev ${limits[k] === 'max' ? '0' : limits[k]}" || kr_fail "cannot write $cg/${V1_FILE[k]}"`,
        );
  const missing = missingOk ? 'echo "cgroup $cg is gone: nothing to undo"; exit 0' : 'kr_fail "no cgroup $cg (did etcd restart?)"';
  return cgroupScript('blkio', `throttle-etcd-disk ${purpose}`, vars(t), `{ ${missing}; }`, [
    ...writes,
    `echo "io limits of $cg on $dev: ${keys.map((k) => `${k}=${limits[k]}`).join(' ')}"`,
  ]);
}
