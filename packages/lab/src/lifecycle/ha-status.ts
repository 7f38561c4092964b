import { readFile } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { messageOf } from 'kube-runbook/internal/core/errors.js';
import type { LabInfo } from '../host/info.js';
import { LB_NODE } from '../host/paths.js';
import { SimApi } from '../sim/api.js';
import { parseShowStat, statsCommand, type BackendState } from './haproxy.js';

/** What `lab status` shows of an HA lab: etcd's members and leader, the controllers' leaders, HAProxy's backends. */
export interface HaStatus {
  etcd: { member: string; url: string; id?: string; leader?: string; raftTerm?: string; error?: string }[];
  /** Member name of etcd's leader, as the members that answer see it. */
  etcdLeader?: string;
  leases: { name: string; holder?: string; renewTime?: string; transitions?: number; error?: string }[];
  backends: BackendState[];
  backendsError?: string;
}

/** The client certificate a member's etcd asks for: none on the lab's own control plane, kubeadm's for its health checks. */
export interface EtcdClientTls {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** kubeadm's etcd serves its clients over TLS only: the certificate kubeadm made for its health checks (cp-1's copy). */
async function kubeadmEtcdTls(info: LabInfo): Promise<EtcdClientTls> {
  const pki = join(info.stateDir, 'nodes', 'cp-1', 'kubernetes', 'pki', 'etcd');
  const [ca, cert, key] = await Promise.all(
    ['ca.crt', 'healthcheck-client.crt', 'healthcheck-client.key'].map((f) => readFile(join(pki, f))),
  );
  return { ca: ca!, cert: cert!, key: key! };
}

/** POSTs `{}` to `url` (http, or https with `tls`) and returns its JSON body. */
function postEmpty(url: string, timeoutMs: number, tls?: EtcdClientTls): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const options = { method: 'POST', timeout: timeoutMs, headers: { 'content-type': 'application/json' } };
    const req =
      u.protocol === 'https:'
        ? httpsRequest(u, { ...options, ...(tls ?? {}), servername: u.hostname }, answer)
        : httpRequest(u, options, answer);
    function answer(res: IncomingMessage) {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if ((res.statusCode ?? 0) >= 300) return reject(new Error(`HTTP ${res.statusCode}`));
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
      res.on('error', reject);
    }
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end('{}');
  });
}

/**
 * One member's view through etcd's gRPC gateway (`POST /v3/maintenance/status`): its own id and the leader's. Plain
 * HTTP on the lab's own control plane (its etcd has no TLS); on kubeadm's, TLS with kubeadm's health-check client
 * certificate.
 */
async function etcdMemberStatus(
  url: string,
  timeoutMs: number,
  tls?: EtcdClientTls,
): Promise<{ id?: string; leader?: string; raftTerm?: string }> {
  const body = (await postEmpty(`${url}/v3/maintenance/status`, timeoutMs, tls)) as {
    header?: { member_id?: string };
    leader?: string;
    raftTerm?: string;
  };
  return { id: body.header?.member_id, leader: body.leader, raftTerm: body.raftTerm };
}

export async function haStatus(info: LabInfo, kc: KubeConfig, timeoutMs = 3000): Promise<HaStatus> {
  const members = info.members ?? [];
  const tls = info.settings.kubeadm ? await kubeadmEtcdTls(info).catch(() => undefined) : undefined;
  const etcd: HaStatus['etcd'] = await Promise.all(
    members.map(async (m): Promise<HaStatus['etcd'][number]> => {
      try {
        return { member: m.name, url: m.etcdUrl, ...(await etcdMemberStatus(m.etcdUrl, timeoutMs, tls)) };
      } catch (e) {
        return { member: m.name, url: m.etcdUrl, error: messageOf(e) };
      }
    }),
  );
  const leaderId = etcd.find((e) => e.leader && e.leader !== '0')?.leader;
  const etcdLeader = etcd.find((e) => e.id && e.id === leaderId)?.member;
  const api = new SimApi(kc, timeoutMs);
  const leases = await Promise.all(
    ['kube-controller-manager', 'kube-scheduler'].map(async (name) => {
      try {
        const l = await api.coord.readNamespacedLease({ name, namespace: 'kube-system' }, api.opts());
        const renew = l.spec?.renewTime as unknown;
        return {
          name,
          holder: l.spec?.holderIdentity,
          renewTime: renew instanceof Date ? renew.toISOString() : (renew as string | undefined),
          transitions: l.spec?.leaseTransitions,
        };
      } catch (e) {
        return { name, error: messageOf(e) };
      }
    }),
  );
  await api.close();
  const status: HaStatus = { etcd, ...(etcdLeader ? { etcdLeader } : {}), leases, backends: [] };
  try {
    status.backends = parseShowStat(
      await statsCommand(join(info.stateDir, 'nodes', LB_NODE, 'haproxy', 'stats.sock'), 'show stat', timeoutMs),
    );
  } catch (e) {
    status.backendsError = messageOf(e);
  }
  return status;
}

/** Lines of `lab status` for an HA lab. */
export function renderHa(h: HaStatus): string[] {
  const lines = ['', 'ETCD MEMBERS'];
  for (const e of h.etcd)
    lines.push(
      `  ${e.member.padEnd(10)} ${e.url.padEnd(28)} ${e.error ? `unreachable (${e.error})` : e.member === h.etcdLeader ? 'leader' : 'follower'}`,
    );
  if (!h.etcdLeader) lines.push('  (no leader seen)');
  lines.push('', 'LEADERS');
  for (const l of h.leases)
    lines.push(
      `  ${l.name.padEnd(24)} ${l.error ? `(${l.error})` : `${l.holder ?? '-'}, renewed ${l.renewTime ?? '-'}, ${l.transitions ?? 0} transition(s)`}`,
    );
  lines.push('', 'HAPROXY BACKENDS');
  if (h.backendsError) lines.push(`  (stats socket: ${h.backendsError})`);
  for (const b of h.backends)
    lines.push(`  ${b.server.padEnd(10)} ${b.status.padEnd(10)} ${b.check}${b.lastChangeS !== undefined ? `, for ${b.lastChangeS}s` : ''}`);
  return lines;
}
