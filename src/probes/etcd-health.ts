import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { messageOf } from '../core/errors.js';
import { EtcdUnreachable, type EtcdScrape, etcdMembers, etcdTarget, quorumOf, scrapeEtcd } from '../kube/etcd-metrics.js';
import { type Buckets, delta, histogram, quantile, sample } from '../kube/prometheus.js';
import { formatDuration } from '../core/duration.js';
import { duration, httpUrl } from '../core/zod-helpers.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';

const Params = z.strictObject({
  url: httpUrl()
    .optional()
    .meta({ description: "etcd's client or metrics URL; http://127.0.0.1:2379 on a lab, :2381 (kubeadm's metrics port) elsewhere" }),
  node: z.string().min(1).optional().meta({
    description:
      'inventory node to ask from (curl or wget on it); the first etcd or control-plane node when neither node nor direct is set',
  }),
  direct: z.boolean().default(false).meta({ description: 'ask the URL from this machine instead of through a node' }),
  cacert: z.string().min(1).optional().meta({ description: 'CA certificate file for https (on the node, or here when direct)' }),
  cert: z.string().min(1).optional().meta({ description: 'client certificate file' }),
  key: z.string().min(1).optional().meta({ description: 'client key file' }),
  interval: duration().prefault('5s').meta({ description: 'how often to scrape; percentiles cover the last interval' }),
  timeout: duration().prefault('3s'),
  maxWalFsync: duration()
    .prefault('100ms')
    .meta({ description: 'violated when the p99 of etcd_disk_wal_fsync_duration_seconds is above this' }),
  maxBackendCommit: duration()
    .prefault('250ms')
    .meta({ description: 'violated when the p99 of etcd_disk_backend_commit_duration_seconds is above this' }),
  unreachable: z.enum(['violated', 'unknown']).default('violated').meta({ description: 'what an etcd that does not answer reads as' }),
  members: z
    .boolean()
    .default(false)
    .meta({
      description:
        'ask every etcd member of the inventory (each through its own node, at `url`): members, leader, leader changes and quorum; ' +
        'a member down reads ok while a quorum answers with a leader',
    }),
  minMembers: z
    .number()
    .int()
    .min(1)
    .optional()
    .meta({ description: 'with `members`: violated while fewer members answer (e.g. 3: all back)' }),
  electionGrace: duration().prefault('10s').meta({
    description:
      "with `members`: a quorum answering without a leader reads unknown this long (an election under way: the leader just went; with etcd's default 1 s election timeout, pre-vote and a busy host an election has been seen to take 5 s), violated after",
  }),
});
type Params = z.output<typeof Params>;

const WAL = 'etcd_disk_wal_fsync_duration_seconds';
const COMMIT = 'etcd_disk_backend_commit_duration_seconds';

export interface EtcdMemberValue {
  name: string;
  up: boolean;
  leader: boolean;
}

export interface EtcdValue {
  healthy: boolean | null;
  hasLeader: boolean | null;
  /** p99 over the last interval (the whole life of etcd on the first scrape), ms; null without writes. */
  walFsyncP99Ms: number | null;
  backendCommitP99Ms: number | null;
  error?: string;
  /** With `members`: each member's view, the leader's name, leader changes seen since the probe started, quorum. */
  members?: EtcdMemberValue[];
  leader?: string | null;
  leaderChanges?: number;
  quorum?: boolean;
}

/** etcd's health and its disk latencies (incident 3: writes of 1–10 s made lease renewals late). */
export default defineProbe({
  meta: {
    access: [],
    id: 'etcd-health',
    summary:
      'etcd /health and the p99 of its WAL fsync and backend commit latencies; with `members`, members, leader, leader changes and quorum.',
    description:
      "Scrapes etcd's `/health` and `/metrics` every `interval`, through a node (curl or wget run there by its " +
      'transport) or directly from this machine (`direct: true`). Ok when etcd is healthy and the p99 of ' +
      '`etcd_disk_wal_fsync_duration_seconds` and `etcd_disk_backend_commit_duration_seconds` over the last interval ' +
      'are within `maxWalFsync` and `maxBackendCommit`. An etcd that does not answer reads violated (or unknown with ' +
      '`unreachable: unknown`); a node that cannot be reached reads unknown. With `members: true` it asks every etcd ' +
      'member of the inventory through its own node and reports the members that answer, the leader ' +
      '(`etcd_server_is_leader`), the leader changes since it started and whether a quorum answers: ok while a quorum ' +
      'answers with a leader (one member of three down is ok), violated without quorum or leader, or with fewer ' +
      'members than `minMembers`. Polled: metrics have no event stream.',
    params: Params,
  },
  start(ctx, params) {
    if (params.members) return startMembers(ctx, params);
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
  const value: EtcdValue = {
    healthy,
    hasLeader: leader === undefined ? null : leader === 1,
    walFsyncP99Ms: ms(wal),
    backendCommitP99Ms: ms(commit),
  };
  const problems: string[] = [];
  if (!healthy) problems.push(`unhealthy (${s.health.trim().slice(0, 80) || 'no answer'})`);
  if (value.hasLeader === false) problems.push('no leader');
  if (value.walFsyncP99Ms !== null && value.walFsyncP99Ms > params.maxWalFsync)
    problems.push(`WAL fsync p99 above ${formatDuration(params.maxWalFsync)}`);
  if (value.backendCommitP99Ms !== null && value.backendCommitP99Ms > params.maxBackendCommit)
    problems.push(`backend commit p99 above ${formatDuration(params.maxBackendCommit)}`);
  const fmt = (v: number | null) => (v === null ? 'n/a' : `${v}ms`);
  const detail = `${healthy ? 'healthy' : 'unhealthy'}, WAL fsync p99 ${fmt(value.walFsyncP99Ms)}, backend commit p99 ${fmt(value.backendCommitP99Ms)}${problems.length ? `: ${problems.join('; ')}` : ''}`;
  return { status: problems.length ? 'violated' : 'ok', at: ctx.clock.now(), value, detail };
}

/**
 * Every member, each through its own node: who answers, who leads (`etcd_server_is_leader`), how often the leader
 * changed (leaders seen to change between readings, or any member's `etcd_server_leader_changes_seen_total`
 * growing, whichever is more), and whether a quorum answers. Disk latencies are the leader's.
 */
function startMembers(ctx: Ctx, params: Params) {
  const members = etcdMembers(ctx.inventory.spec.nodes);
  const url = etcdTarget(ctx, { url: params.url, direct: true }).url;
  let lastLeader: string | null | undefined;
  let leaderlessSince: number | undefined;
  let changes = 0;
  const seen = new Map<string, number>();
  let before: { wal: Buckets; commit: Buckets } | undefined;
  const check = async (): Promise<Reading<EtcdValue>> => {
    const views = await Promise.all(
      members.map(async (m) => {
        try {
          return { name: m.name, scrape: await scrapeEtcd(ctx, { url, node: m.name }, params) };
        } catch (e) {
          return {
            name: m.name,
            error: e instanceof EtcdUnreachable ? `does not answer: ${messageOf(e)}` : `cannot reach its node: ${messageOf(e)}`,
            nodeDown: !(e instanceof EtcdUnreachable),
          };
        }
      }),
    );
    const at = ctx.clock.now();
    const list: EtcdMemberValue[] = views.map((v) => ({
      name: v.name,
      up: Boolean(v.scrape),
      leader: v.scrape ? sample(v.scrape.metrics, 'etcd_server_is_leader') === 1 : false,
    }));
    const leader = list.find((m) => m.leader)?.name ?? null;
    let counterGrew = 0;
    for (const v of views) {
      const n = v.scrape ? sample(v.scrape.metrics, 'etcd_server_leader_changes_seen_total') : undefined;
      if (n === undefined) continue;
      const prev = seen.get(v.name);
      if (prev !== undefined && n > prev) counterGrew = Math.max(counterGrew, n - prev);
      seen.set(v.name, n);
    }
    const observed = lastLeader !== undefined && leader !== null && leader !== lastLeader ? 1 : 0;
    changes += Math.max(observed, counterGrew);
    if (leader !== null) lastLeader = leader;
    const up = list.filter((m) => m.up).length;
    const quorum = up >= quorumOf(members.length);
    const lead = views.find((v) => v.name === leader)?.scrape;
    const wal = lead ? histogram(lead.metrics, WAL) : undefined;
    const commit = lead ? histogram(lead.metrics, COMMIT) : undefined;
    const base = lead && wal && commit ? judge(ctx, params, lead, delta(wal, before?.wal), delta(commit, before?.commit)) : undefined;
    if (wal && commit) before = { wal, commit };
    const value: EtcdValue = {
      healthy: quorum && leader !== null,
      hasLeader: leader !== null,
      walFsyncP99Ms: base?.value.walFsyncP99Ms ?? null,
      backendCommitP99Ms: base?.value.backendCommitP99Ms ?? null,
      members: list,
      leader,
      leaderChanges: changes,
      quorum,
    };
    const problems: string[] = [];
    leaderlessSince = leader === null ? (leaderlessSince ?? at) : undefined;
    const electing = quorum && leader === null && at - leaderlessSince! < params.electionGrace;
    if (!quorum) problems.push(`no quorum: ${up} of ${members.length} member(s) answer, ${quorumOf(members.length)} needed`);
    else if (electing)
      problems.push(
        `no leader for ${formatDuration(at - leaderlessSince!)}: an election is under way (unknown for up to ${formatDuration(params.electionGrace)})`,
      );
    else if (leader === null) problems.push('no leader');
    if (params.minMembers !== undefined && up < params.minMembers) problems.push(`${up} member(s) answer, fewer than ${params.minMembers}`);
    if (base?.status === 'violated') problems.push(base.detail.slice(base.detail.indexOf(': ') + 2));
    const downs = views.filter((v) => !v.scrape).map((v) => `${v.name} ${v.error}`);
    const detail =
      `${up} of ${members.length} member(s) answer, leader ${leader ?? 'none'}, ${changes} leader change(s)` +
      (downs.length ? ` (${downs.join('; ')})` : '') +
      (problems.length ? `: ${problems.join('; ')}` : '');
    // members whose nodes cannot be reached leave the answer open only when they could make the difference
    const unreachableNodes = views.filter((v) => v.nodeDown).length;
    const open = (!quorum && up + unreachableNodes >= quorumOf(members.length)) || (electing && problems.length === 1);
    const status = problems.length ? (open ? 'unknown' : 'violated') : 'ok';
    return { status, at, value, detail };
  };
  return polled(
    ctx,
    params.interval,
    check,
    (r) => `${r.status}|${r.value.leader}|${r.value.leaderChanges}|${r.value.members?.map((m) => Number(m.up)).join('')}`,
  );
}
