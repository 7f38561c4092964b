import type { ActionCtx } from '../contract/context.js';
import { z } from 'zod';
import { KrError, quote } from '../core/errors.js';
import { IO_KEYS, readLimitsScript, writeLimitsScript, type IoKey, type IoLimits, type IoTarget } from './parts/cgroup-io.js';
import { describeTarget, runOnNode, serviceManager, serviceTarget, targetNode } from '../nodes/services/index.js';
import { KR_FAIL, script } from '../nodes/services/script.js';
import { defineAction } from '../contract/action.js';
import { scriptFault } from './parts/script-fault.js';

const UNIT: Record<string, number> = { '': 1, k: 1e3, M: 1e6, G: 1e9, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };
const bytes = () =>
  z
    .union([
      z.number().int().min(1),
      z.string().regex(/^\d+(?:Ki|Mi|Gi|k|M|G)?$/, { message: 'expected bytes such as 1048576, 512Ki or 1Mi' }),
    ])
    .transform((v) => (typeof v === 'number' ? v : Number(/^\d+/.exec(v)![0]) * UNIT[v.replace(/^\d+/, '')]!));
const iops = () => z.number().int().min(1);

const Params = z
  .strictObject({
    readIops: iops().optional().meta({ description: 'read operations per second the etcd cgroup may do on its disk' }),
    writeIops: iops().optional().meta({ description: 'write operations per second (fsyncs of the WAL are writes)' }),
    readBps: bytes().optional().meta({ description: 'read bytes per second: a number or 512Ki, 1Mi, 10M' }),
    writeBps: bytes().optional().meta({ description: 'write bytes per second: a number or 512Ki, 1Mi, 10M' }),
    dataDir: z
      .string()
      .regex(/^\/[^\n]*$/, { message: 'expected an absolute path' })
      .optional()
      .meta({
        description: "etcd's data directory, as etcd sees it; found from its command line and environment when absent",
        examples: ['/var/lib/etcd'],
      }),
  })
  .refine((p) => [p.readIops, p.writeIops, p.readBps, p.writeBps].some((x) => x !== undefined), {
    message: 'give at least one of readIops, writeIops, readBps, writeBps',
  });

type State = IoTarget & { node: string; pid: number; dataDir: string; limits: Partial<IoLimits>; previous: IoLimits };

/** Read-only: etcd's data dir, the whole disk under it, its cgroup. */
function inspectScript(pid: number, dataDir: string | undefined, k3s: boolean): string {
  return script(
    'throttle-etcd-disk inspect',
    { pid, dd: dataDir ?? '', k3s: k3s ? 1 : 0 },
    KR_FAIL,
    '[ "$(id -u 2>/dev/null)" = 0 ] || kr_fail "throttling needs root (run as root, or set transport.sudo in the inventory)"',
    '[ -r "/proc/$pid/cmdline" ] || kr_fail "no process $pid"',
    'flag() { tr "\\000" "\\n" <"/proc/$pid/cmdline" | { p=; o=; while IFS= read -r a; do for f in "$@"; do [ "$p" = "$f" ] && o=$a; case $a in "$f"=*) o=${a#*=} ;; esac; done; p=$a; done; printf "%s" "$o"; }; }',
    'if [ -z "$dd" ]; then',
    '  if [ "$k3s" = 1 ]; then',
    '    dd=$(flag --data-dir -d)',
    '    dd=${dd:-/var/lib/rancher/k3s}/server/db',
    '  else',
    '    dd=$(flag --data-dir -data-dir)',
    '    [ -n "$dd" ] || dd=$(tr "\\000" "\\n" <"/proc/$pid/environ" 2>/dev/null | sed -n "s/^ETCD_DATA_DIR=//p" | head -n 1)',
    '    [ -n "$dd" ] || dd="$(flag --name -name).etcd"',
    '    [ "$dd" != .etcd ] || dd=default.etcd',
    '  fi',
    'fi',
    'case $dd in /*) path=/proc/$pid/root$dd ;; *) path=/proc/$pid/cwd/$dd ;; esac',
    '[ -e "$path" ] || kr_fail "etcd data dir $dd not found (set with.dataDir)"',
    'dev=$(stat -L -c %d "$path") || kr_fail "cannot stat $dd"',
    'maj=$(((dev >> 8) & 0xfff)); min=$(((dev & 0xff) | ((dev >> 12) & 0xfff00)))',
    'if [ "$maj" = 0 ]; then',
    '  src=$(findmnt -N "$pid" -n -o SOURCE -T "$dd" 2>/dev/null || findmnt -n -o SOURCE -T "$path" 2>/dev/null)',
    '  src=${src%%\\[*}',
    '  [ -b "$src" ] || kr_fail "etcd data dir $dd is on ${src:-a file system} without a block device: nothing to throttle"',
    '  maj=$((0x$(stat -L -c %t "$src"))); min=$((0x$(stat -L -c %T "$src")))',
    'fi',
    'if [ -e "/sys/dev/block/$maj:$min/partition" ]; then',
    '  whole=$(cat "/sys/dev/block/$maj:$min/../dev") || kr_fail "cannot find the disk of partition $maj:$min"',
    '  maj=${whole%%:*}; min=${whole#*:}',
    'fi',
    `v1=$(awk -F: '$1 != "0" { n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] == "blkio") { sub(/^[^:]*:[^:]*:/, ""); print; exit } }' "/proc/$pid/cgroup")`,
    'v2=$(sed -n "s/^0:://p" "/proc/$pid/cgroup" | head -n 1)',
    'if [ -n "$v1" ]; then echo "cgroup=1 $v1"; elif [ -n "$v2" ]; then echo "cgroup=2 $v2"; else kr_fail "no blkio or unified cgroup for $pid"; fi',
    'printf "datadir=%s\\ndevice=%s:%s\\n" "$dd" "$maj" "$min"',
  );
}

const lines = (out: string) => new Map(out.split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const));

/** Throttles the disk IO of etcd's own cgroup on the disk that holds its data dir. */
export default defineAction({
  meta: {
    access: [],
    id: 'throttle-etcd-disk',
    summary: "Limit the IOPS and bandwidth of etcd's own cgroup on the disk under its data dir (slow etcd disks, incident 3).",
    description:
      "Finds etcd's process on each selected node (control-plane nodes by default), its data directory (`dataDir`, else its " +
      '`--data-dir` flag or `ETCD_DATA_DIR`), the whole disk that holds it, and the cgroup etcd runs in; then limits that cgroup ' +
      'on that disk with cgroup v2 `io.max` or cgroup v1 `blkio.throttle.*`. Only etcd slows down: WAL fsyncs grow slow, ' +
      'writes and lease renewals through the apiserver get late. Give at least one of the four limits. The limits that were there ' +
      'before are recorded and put back. Preflight refuses when etcd runs in the root cgroup or its data dir is on no block device.',
    params: Params,
    targets: 'nodes',
    defaultNodes: 'control-plane',
    kind: 'fault',
    layouts: {
      kubeadm: "finds the `etcd` static pod's process, its data dir through /proc/<pid>/root, and its container cgroup",
      k3s: 'embedded etcd runs inside the k3s server process: the whole `k3s` cgroup is limited on the disk of /var/lib/rancher/k3s/server/db',
      lab: "the lab's etcd runs in a cgroup of its own (`etcd/pid` in the lab state dir); cgroup v1 blkio on this machine, mounted privately when the node's namespace hides it",
    },
    undo: 'writes back the limits that were set before (none, usually); a cgroup that is gone needs nothing; the node-side dead-man runs the same script',
  },

  async preflight(ctx, params) {
    await inspect(ctx, params.dataDir);
  },

  async prepare(ctx, params): Promise<State> {
    const { node, pid, info } = await inspect(ctx, params.dataDir);
    const [version, ...path] = (info.get('cgroup') ?? '').split(' ');
    const cgroup = path.join(' ');
    const device = info.get('device') ?? '';
    if (!/^\d+:\d+$/.test(device))
      throw new KrError('ETCD_DISK_UNKNOWN', `throttle-etcd-disk: no disk found on ${node} (got ${quote(device)})`);
    if (!cgroup.startsWith('/') || cgroup === '/' || /[\n\0]/.test(cgroup))
      throw new KrError(
        'ETCD_CGROUP_UNSUITABLE',
        `throttle-etcd-disk: etcd on ${node} runs in no cgroup of its own (got ${quote(cgroup)}); limiting the root cgroup would slow the whole node`,
      );
    const target: IoTarget = { version: version === '2' ? 2 : 1, cgroup, device };
    const r = await runOnNode(ctx, node, readLimitsScript(target), {
      code: 'ETCD_CGROUP_UNREADABLE',
      message: 'throttle-etcd-disk: cannot read the io limits',
      timeoutMs: 30_000,
    });
    const now = lines(r.stdout);
    const previous = Object.fromEntries(IO_KEYS.map((k) => [k, /^\d+$/.test(now.get(k) ?? '') ? now.get(k)! : 'max'])) as IoLimits;
    const keys: [IoKey, number | undefined][] = [
      ['riops', params.readIops],
      ['wiops', params.writeIops],
      ['rbps', params.readBps],
      ['wbps', params.writeBps],
    ];
    const limits = Object.fromEntries(keys.filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)])) as Partial<IoLimits>;
    return { node, pid, dataDir: info.get('datadir') ?? '', ...target, limits, previous };
  },

  ...scriptFault<State>({
    code: 'THROTTLE_FAILED',
    timeoutMs: 30_000,
    apply: {
      script: (state) => writeLimitsScript('apply', state, state.limits, false),
      failed: 'throttle-etcd-disk: cannot set the io limits',
      applied: (state) =>
        `throttle-etcd-disk: etcd on ${state.node} limited on ${state.device} (${Object.entries(state.limits)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')})`,
    },
    revert: { script: (state) => revertScript(state), failed: 'throttle-etcd-disk: cannot restore the io limits' },
  }),

  describe: (p) =>
    `limit etcd's disk: ${Object.entries(p)
      .filter(([k, v]) => k !== 'dataDir' && v !== undefined)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
});

const revertScript = (s: State) => writeLimitsScript('revert', s, s.previous, true);

async function inspect(ctx: ActionCtx, dataDir: string | undefined) {
  const node = targetNode(ctx, 'throttle-etcd-disk');
  const etcd = serviceTarget(ctx.inventory, node, 'etcd');
  const p = await runOnNode(ctx, node.name, serviceManager(etcd).pid(etcd), {
    code: 'PREFLIGHT_FAILED',
    message: `throttle-etcd-disk: etcd is not running (${describeTarget(etcd)})`,
    timeoutMs: 30_000,
  });
  const pid = Number(p.stdout.trim());
  if (!Number.isInteger(pid) || pid < 1)
    throw new KrError('PREFLIGHT_FAILED', `throttle-etcd-disk: no etcd process id on ${node.name} (got ${quote(p.stdout.trim())})`);
  const r = await runOnNode(ctx, node.name, inspectScript(pid, dataDir, ctx.inventory.spec.layout === 'k3s'), {
    code: 'PREFLIGHT_FAILED',
    message: "throttle-etcd-disk: cannot find etcd's disk and cgroup",
    timeoutMs: 30_000,
  });
  return { node: node.name, pid, info: lines(r.stdout) };
}
