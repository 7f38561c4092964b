import { readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';

/** The kernel's clock ticks a second for /proc/PID/stat's times (USER_HZ: 100 on every Linux architecture the lab runs on). */
const USER_HZ = 100;

/** What a lab's processes used, by program: CPU seconds since they started, resident memory now. */
export interface LabUsage {
  cpuSeconds: Record<string, number>;
  rssMiB: Record<string, number>;
  processes: number;
}

/**
 * The CPU time and resident memory of every process whose command line names the lab's state directory (its control
 * plane, the kubelet simulators and their forwarders, as `lab down` finds them), and of `fleet` (a `lab fleet`
 * process, counted as `fleet`), read from /proc: the machine's own count, not the lab's.
 */
export function labUsage(stateDir: string, fleet?: number): LabUsage {
  const usage: LabUsage = { cpuSeconds: {}, rssMiB: {}, processes: 0 };
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const isFleet = Number(pid) === fleet;
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!isFleet && !argv.some((a) => a.includes(`${stateDir}/`))) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // after the command name in parentheses: state is field 3, utime 14 and stime 15
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = isFleet ? 'fleet' : program(stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), argv);
      const rssKiB = Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
      usage.cpuSeconds[comm] = (usage.cpuSeconds[comm] ?? 0) + (Number(fields[11]) + Number(fields[12])) / USER_HZ;
      usage.rssMiB[comm] = (usage.rssMiB[comm] ?? 0) + rssKiB / 1024;
      usage.processes++;
    } catch {
      // the process ended while read
    }
  }
  return usage;
}

/** A process's program: its `comm`, but a Node.js or shell process by its script (`kubelet-sim`, not `MainThread`). */
function program(comm: string, argv: string[]): string {
  const script = argv.slice(1).find((a) => a !== '' && !a.startsWith('-'));
  if (/^(MainThread|node|sh|bash|dash)$/.test(comm) || basename(argv[0] ?? '') === 'node')
    return script ? basename(script).replace(/\.(m?js|ts|sh)$/, '') : comm;
  return comm;
}

/** The CPU seconds each program used between two readings (processes that ended in between are not counted). */
export function cpuBetween(before: LabUsage, after: LabUsage): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [comm, s] of Object.entries(after.cpuSeconds)) out[comm] = Math.max(0, s - (before.cpuSeconds[comm] ?? 0));
  return out;
}
