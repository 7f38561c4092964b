import type { Clock } from '../core/clock.js';
import type { Inventory, InventoryNode } from '../inventory/schema.js';
import type { NodeAccess } from '../nodes/types.js';
import { messageOf } from '../core/errors.js';
import { shq } from '../core/shell.js';
import { httpGet } from './http-get.js';

/**
 * etcd's /health and /metrics, read through a node of the inventory (curl or wget there, by its transport) or
 * directly from this machine. Shared by the etcd-health probe and `audit`.
 */
export interface EtcdScrape {
  health: string;
  /** Only the lines of the latency histograms and etcd_server_has_leader. */
  metrics: string;
}

export interface EtcdTarget {
  url: string;
  /** Ask from this inventory node; from this machine when absent. */
  node?: string;
}

export interface EtcdAccess {
  url?: string;
  node?: string;
  direct?: boolean;
  cacert?: string;
  cert?: string;
  key?: string;
  timeout: number;
}

/** The etcd members of an inventory: nodes with the `etcd` role, else (stacked etcd) the control-plane nodes. */
export function etcdMembers(nodes: readonly InventoryNode[]): InventoryNode[] {
  const etcd = nodes.filter((n) => n.roles.includes('etcd'));
  return etcd.length ? etcd : nodes.filter((n) => n.roles.includes('control-plane'));
}

/** Members that must answer for a cluster of `members` to accept writes. */
export const quorumOf = (members: number): number => Math.floor(members / 2) + 1;

/** etcd does not answer (its node does). */
export class EtcdUnreachable extends Error {}

/** Where etcd is: the URL given, else the layout's usual one, through the first etcd (or control-plane) node. */
export function etcdTarget(ctx: { inventory: Inventory }, o: Omit<EtcdAccess, 'timeout'>): EtcdTarget {
  const layout = ctx.inventory.spec.layout;
  const url = (o.url ?? (layout === 'lab' ? 'http://127.0.0.1:2379' : 'http://127.0.0.1:2381')).replace(/\/$/, '');
  if (o.direct) return { url };
  const nodes = ctx.inventory.spec.nodes;
  const node = o.node ?? (nodes.find((n) => n.roles.includes('etcd')) ?? nodes.find((n) => n.roles.includes('control-plane')))?.name;
  return { url, node };
}

const METRICS =
  "'^(etcd_disk_(wal_fsync|backend_commit)_duration_seconds_bucket|etcd_server_(has_leader|is_leader|leader_changes_seen_total))'";

export async function scrapeEtcd(
  ctx: { nodes: NodeAccess; clock: Clock; signal: AbortSignal },
  where: EtcdTarget,
  params: EtcdAccess,
): Promise<EtcdScrape> {
  if (!where.node) {
    const get = async (path: string) => {
      try {
        return await httpGet(where.url + path, {
          timeoutMs: params.timeout,
          signal: ctx.signal,
          clock: ctx.clock,
          ca: params.cacert,
          cert: params.cert,
          key: params.key,
        });
      } catch (e) {
        throw new EtcdUnreachable(messageOf(e));
      }
    };
    const [health, metrics] = await Promise.all([get('/health'), get('/metrics')]);
    return { health: health.body, metrics: metrics.body };
  }
  const seconds = Math.max(1, Math.ceil(params.timeout / 1000));
  const tls = [
    params.cacert && `--cacert ${shq(params.cacert)}`,
    params.cert && `--cert ${shq(params.cert)}`,
    params.key && `--key ${shq(params.key)}`,
  ]
    .filter(Boolean)
    .join(' ');
  const script = [
    'fetch() {',
    `  if command -v curl >/dev/null 2>&1; then curl -sS --max-time ${seconds} ${tls} "$1";`,
    `  elif command -v wget >/dev/null 2>&1; then wget -qO- -T ${seconds} "$1";`,
    "  else echo 'neither curl nor wget on this node' >&2; exit 3; fi",
    '}',
    `if ! h=$(fetch ${shq(`${where.url}/health`)} 2>&1); then echo "#unreachable $h"; exit 0; fi`,
    'echo "#health $h"',
    `fetch ${shq(`${where.url}/metrics`)} | grep -E ${METRICS}`,
    'exit 0',
  ].join('\n');
  const r = await ctx.nodes.exec(where.node, script, { timeoutMs: params.timeout + 5000, signal: ctx.signal });
  if (r.code !== 0) throw new Error((r.stderr.trim() || `exit ${r.code}`).split('\n').pop()!);
  const first = r.stdout.split('\n', 1)[0] ?? '';
  if (first.startsWith('#unreachable')) throw new EtcdUnreachable(first.slice('#unreachable'.length).trim() || 'no answer');
  return { health: first.replace(/^#health /, ''), metrics: r.stdout };
}
