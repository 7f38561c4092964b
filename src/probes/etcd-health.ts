import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { EtcdUnreachable, type EtcdScrape, etcdTarget, scrapeEtcd } from '../kube/etcd-metrics.js';
import { type Buckets, delta, histogram, quantile, sample } from '../kube/prometheus.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';

const Params = z.strictObject({
  url: z
    .string()
    .regex(/^https?:\/\/[^\s'"]+$/, { message: 'expected an http:// or https:// URL' })
    .optional()
    .meta({ description: "etcd's client or metrics URL; http://127.0.0.1:2379 on a lab, :2381 (kubeadm's metrics port) elsewhere" }),
  node: z
    .string()
    .min(1)
    .optional()
    .meta({ description: 'inventory node to ask from (curl or wget on it); the first etcd or control-plane node when neither node nor direct is set' }),
  direct: z.boolean().default(false).meta({ description: 'ask the URL from this machine instead of through a node' }),
  cacert: z.string().min(1).optional().meta({ description: 'CA certificate file for https (on the node, or here when direct)' }),
  cert: z.string().min(1).optional().meta({ description: 'client certificate file' }),
  key: z.string().min(1).optional().meta({ description: 'client key file' }),
  interval: duration().prefault('5s').meta({ description: 'how often to scrape; percentiles cover the last interval' }),
  timeout: duration().prefault('3s'),
  maxWalFsync: duration().prefault('100ms').meta({ description: 'violated when the p99 of etcd_disk_wal_fsync_duration_seconds is above this' }),
  maxBackendCommit: duration().prefault('250ms').meta({ description: 'violated when the p99 of etcd_disk_backend_commit_duration_seconds is above this' }),
  unreachable: z.enum(['violated', 'unknown']).default('violated').meta({ description: 'what an etcd that does not answer reads as' }),
});
type Params = z.output<typeof Params>;

const WAL = 'etcd_disk_wal_fsync_duration_seconds';
const COMMIT = 'etcd_disk_backend_commit_duration_seconds';

export interface EtcdValue {
  healthy: boolean | null;
  hasLeader: boolean | null;
  /** p99 over the last interval (the whole life of etcd on the first scrape), ms; null without writes. */
  walFsyncP99Ms: number | null;
  backendCommitP99Ms: number | null;
  error?: string;
}

/** etcd's health and its disk latencies (incident 3: writes of 1–10 s made lease renewals late). */
export default defineProbe({
  meta: {
    access: [],
    id: 'etcd-health',
    summary: 'etcd /health and the p99 of its WAL fsync and backend commit latencies.',
    description:
      "Scrapes etcd's `/health` and `/metrics` every `interval`, through a node (curl or wget run there by its " +
      'transport) or directly from this machine (`direct: true`). Ok when etcd is healthy and the p99 of ' +
      '`etcd_disk_wal_fsync_duration_seconds` and `etcd_disk_backend_commit_duration_seconds` over the last interval ' +
      'are within `maxWalFsync` and `maxBackendCommit`. An etcd that does not answer reads violated (or unknown with ' +
      '`unreachable: unknown`); a node that cannot be reached reads unknown. Polled: metrics have no event stream.',
    params: Params,
  },
  start(ctx, params) {
    const where = etcdTarget(ctx, params);
    let before: { wal: Buckets; commit: Buckets } | undefined;
    const check = async (): Promise<Reading<EtcdValue>> => {
      try {
        const s = await scrapeEtcd(ctx, where, params);
        const wal = histogram(s.metrics, WAL);
        const commit = histogram(s.metrics, COMMIT);
        const r = judge(ctx, params, s, delta(wal, before?.wal), delta(commit, before?.commit));
        before = { wal, commit };
        return r;
      } catch (e) {
        const error = messageOf(e);
        const nobody = { healthy: null, hasLeader: null, walFsyncP99Ms: null, backendCommitP99Ms: null, error };
        return e instanceof EtcdUnreachable
          ? { status: params.unreachable, at: ctx.clock.now(), value: nobody, detail: `etcd does not answer at ${where.url}: ${error}` }
          : { status: 'unknown', at: ctx.clock.now(), value: nobody, detail: `cannot reach ${where.node ?? 'etcd'}: ${error}` };
      }
    };
    return polled(ctx, params.interval, check, (r) => `${r.status}|${r.value.healthy}|${r.value.error ?? ''}`);
  },
});

function judge(ctx: Ctx, params: Params, s: EtcdScrape, wal: Buckets, commit: Buckets): Reading<EtcdValue> {
  const healthy = /"health"\s*:\s*"?true"?/.test(s.health);
  const leader = sample(s.metrics, 'etcd_server_has_leader');
  const ms = (b: Buckets) => {
    const q = quantile(0.99, b);
    return q === undefined ? null : Math.round(q * 1000 * 10) / 10;
  };
  const value: EtcdValue = { healthy, hasLeader: leader === undefined ? null : leader === 1, walFsyncP99Ms: ms(wal), backendCommitP99Ms: ms(commit) };
  const problems: string[] = [];
  if (!healthy) problems.push(`unhealthy (${s.health.trim().slice(0, 80) || 'no answer'})`);
  if (value.hasLeader === false) problems.push('no leader');
  if (value.walFsyncP99Ms !== null && value.walFsyncP99Ms > params.maxWalFsync) problems.push(`WAL fsync p99 above ${formatDuration(params.maxWalFsync)}`);
  if (value.backendCommitP99Ms !== null && value.backendCommitP99Ms > params.maxBackendCommit)
    problems.push(`backend commit p99 above ${formatDuration(params.maxBackendCommit)}`);
  const fmt = (v: number | null) => (v === null ? 'n/a' : `${v}ms`);
  const detail = `${healthy ? 'healthy' : 'unhealthy'}, WAL fsync p99 ${fmt(value.walFsyncP99Ms)}, backend commit p99 ${fmt(value.backendCommitP99Ms)}${problems.length ? `: ${problems.join('; ')}` : ''}`;
  return { status: problems.length ? 'violated' : 'ok', at: ctx.clock.now(), value, detail };
}
