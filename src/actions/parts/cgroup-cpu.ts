import { KrError, quote } from '../../core/errors.js';
import { shq } from '../../core/shell.js';
import { CG_WRITE as WRITE, cgroupScript } from './cgroup-mount.js';

/** Where a process's CPU is limited; plain JSON. */
export type CpuTarget = {
  /** 1: cpu.cfs_quota_us and cpu.cfs_period_us (cgroup v1); 2: cpu.max (unified). */
  version: 1 | 2;
  /** The cgroup path from /proc/<pid>/cgroup, relative to the hierarchy's root. */
  cgroup: string;
};

/** A CPU bandwidth limit as the kernel keeps it: `quota` microseconds (or `max`) of CPU per `period` microseconds. */
export type CpuLimit = { quota: string; period: string };

/** The period every quota is set with: the kernel's default, 100 ms, so 1 % of one CPU is its smallest quota (1 ms). */
export const CPU_PERIOD_US = 100_000;

const READ = `cat "$1$2"`;

/**
 * Why a cgroup path would not name a cgroup under the hierarchy's root, or undefined: it must be absolute, with no
 * `.` or `..` part. /proc/PID/cgroup shows `/../..` for a process outside the reader's cgroup namespace; written after
 * the root, that would reach outside the hierarchy.
 */
export function cgroupPathProblem(cgroup: string): string | undefined {
  if (!cgroup.startsWith('/')) return 'not an absolute path';
  if (/[\n\0]/.test(cgroup)) return 'a path with a newline or NUL';
  if (cgroup.split('/').some((part) => part === '..' || part === '.')) return 'a path with a `.` or `..` part, outside the cgroup root';
  return undefined;
}

const vars = (t: CpuTarget) => {
  const problem = cgroupPathProblem(t.cgroup);
  if (problem)
    throw new KrError('CPU_CGROUP_UNSAFE', `starve-cpu: cgroup ${quote(t.cgroup)} is ${problem}: nothing is read or written there`);
  return { version: t.version, cg: t.cgroup };
};

/** Read-only: prints `quota=…` and `period=…` now set on the cgroup (`quota=max` when it has none). */
export function readCpuScript(t: CpuTarget): string {
  const body =
    t.version === 2
      ? [
          `line=$(kr_cg_do "$version" ${shq(READ)} "$cg/cpu.max") || kr_fail "no cpu.max in $cg: the cpu controller is not enabled for it"`,
          'set -- $line',
          'echo "quota=${1:-}"',
          'echo "period=${2:-}"',
        ]
      : [
          `q=$(kr_cg_do "$version" ${shq(READ)} "$cg/cpu.cfs_quota_us") || kr_fail "no cpu.cfs_quota_us in $cg"`,
          `p=$(kr_cg_do "$version" ${shq(READ)} "$cg/cpu.cfs_period_us") || kr_fail "no cpu.cfs_period_us in $cg"`,
          // -1 is v1's "no limit"
          '[ "$q" = -1 ] && q=max',
          'echo "quota=$q"',
          'echo "period=$p"',
        ];
  return cgroupScript('cpu', 'starve-cpu read quota', vars(t), 'kr_fail "no cgroup $cg"', body);
}

/**
 * Sets the limit on the cgroup. With `missingOk`, a cgroup that is gone (its process ended) is not an error: there is
 * nothing left to undo. On v1 the quota is lifted before the period changes (the kernel refuses a period that would
 * make the quota it has too large for its parent) and set after it.
 */
export function writeCpuScript(purpose: string, t: CpuTarget, limit: CpuLimit, missingOk: boolean): string {
  if (!/^(?:\d+|max)$/.test(limit.quota) || !/^\d+$/.test(limit.period))
    throw new Error(`a cpu limit is a number of microseconds (or max) per a number of microseconds, not ${JSON.stringify(limit)}`);
  const writes =
    t.version === 2
      ? [`kr_cg_do "$version" ${shq(WRITE)} "$cg/cpu.max" "$quota $period" || kr_fail "cannot write $cg/cpu.max"`]
      : [
          'v1q=$quota; [ "$v1q" = max ] && v1q=-1',
          `kr_cg_do "$version" ${shq(WRITE)} "$cg/cpu.cfs_quota_us" -1 || kr_fail "cannot write $cg/cpu.cfs_quota_us"`,
          `kr_cg_do "$version" ${shq(WRITE)} "$cg/cpu.cfs_period_us" "$period" || kr_fail "cannot write $cg/cpu.cfs_period_us"`,
          `kr_cg_do "$version" ${shq(WRITE)} "$cg/cpu.cfs_quota_us" "$v1q" || kr_fail "cannot write $cg/cpu.cfs_quota_us"`,
        ];
  const missing = missingOk ? 'echo "cgroup $cg is gone: nothing to undo"; exit 0' : 'kr_fail "no cgroup $cg (did the process restart?)"';
  return cgroupScript('cpu', `starve-cpu ${purpose}`, { ...vars(t), quota: limit.quota, period: limit.period }, `{ ${missing}; }`, [
    ...writes,
    'echo "cpu limit of $cg: $quota per $period us"',
  ]);
}
