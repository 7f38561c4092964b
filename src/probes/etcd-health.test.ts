import { afterEach, describe, expect, it } from 'vitest';
import type { InventoryInput } from '../inventory/schema.js';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type EtcdValue } from './etcd-health.js';
import { inventoryOf } from '../testing/inventories.js';

let t: ProbeTester;
afterEach(async () => t.close());

const LE = [
  '0.001',
  '0.002',
  '0.004',
  '0.008',
  '0.016',
  '0.032',
  '0.064',
  '0.128',
  '0.256',
  '0.512',
  '1.024',
  '2.048',
  '4.096',
  '8.192',
  '+Inf',
];

/** etcd's metrics with `n` WAL fsyncs and commits so far, all of them taking about `seconds`. */
function metrics(n: number, seconds: number, o: { leader?: boolean; changes?: number } = {}): string {
  const lines: string[] = [];
  for (const name of ['etcd_disk_wal_fsync_duration_seconds', 'etcd_disk_backend_commit_duration_seconds'])
    for (const le of LE) lines.push(`${name}_bucket{le="${le}"} ${le === '+Inf' || Number(le) >= seconds ? n : 0}`);
  lines.push('etcd_server_has_leader 1');
  if (o.leader !== undefined)
    lines.push(`etcd_server_is_leader ${o.leader ? 1 : 0}`, `etcd_server_leader_changes_seen_total ${o.changes ?? 1}`);
  return lines.join('\n');
}

/** An HA lab's inventory: three etcd members. */
const haInventory: InventoryInput = inventoryOf(
  {
    layout: 'lab',
    transport: { type: 'local' },
    lab: { stateDir: '/nonexistent/lab' },
    nodes: [
      { name: 'cp-1', roles: ['control-plane', 'etcd'] },
      { name: 'cp-2', roles: ['control-plane', 'etcd'] },
      { name: 'cp-3', roles: ['control-plane', 'etcd'] },
      { name: 'node-1', zone: 'zone-a' },
    ],
  },
  'ha',
);

describe('etcd-health', () => {
  it('scrapes through the etcd node and judges the p99 of the last interval', async () => {
    t = new ProbeTester();
    let writes = 1000;
    let latency = 0.0015;
    let answering = true;
    t.nodes.handler = () => {
      writes += 100;
      if (!answering)
        return { code: 0, stdout: '#unreachable curl: (7) Failed to connect to 127.0.0.1 port 2379: Connection refused\n', stderr: '' };
      return { code: 0, stdout: `#health {"health":"true"}\n${metrics(writes, latency)}\n`, stderr: '' };
    };
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.value).toEqual({ healthy: true, hasLeader: true, walFsyncP99Ms: 2, backendCommitP99Ms: 2 } satisfies EtcdValue);
    expect(t.nodes.calls[0]?.node).toBe('cp-1');
    expect(t.nodes.calls[0]?.script).toContain('fetch http://127.0.0.1:2379/metrics |');
    latency = 1.5; // a throttled disk: new writes take 1.5 s
    const slow = await run.until((r) => r.status === 'violated');
    expect(slow.detail).toBe(
      'healthy, WAL fsync p99 2037.8ms, backend commit p99 2037.8ms: WAL fsync p99 above 100ms; backend commit p99 above 250ms',
    );
    answering = false;
    const down = await run.until((r) => r.detail.startsWith('etcd does not answer'));
    expect(down.status).toBe('violated');
  });

  it('reads unknown when the node itself cannot be reached', async () => {
    t = new ProbeTester();
    t.nodes.handler = () => {
      throw new Error('ssh: connect to host cp-1 port 22: No route to host');
    };
    const run = t.start(probe, { node: 'cp-1', url: 'https://127.0.0.1:2381', cacert: "/etc/kubernetes/pki/etcd/ca'.crt" });
    const r = await run.until((x) => x.status === 'unknown');
    expect(r.detail).toBe('cannot reach cp-1: ssh: connect to host cp-1 port 22: No route to host');
    expect(t.nodes.calls[0]?.script).toContain(`--cacert '/etc/kubernetes/pki/etcd/ca'\\''.crt'`);
  });

  it('with members: reports each member, the leader, leader changes and quorum; one member down of three is ok', async () => {
    t = new ProbeTester({ inventory: haInventory });
    const down = new Set<string>();
    let leader = 'cp-1';
    let changes = 1;
    t.nodes.handler = ({ node }) => {
      if (down.has(node)) return { code: 0, stdout: '#unreachable curl: (7) Connection refused\n', stderr: '' };
      return { code: 0, stdout: `#health {"health":"true"}\n${metrics(100, 0.0015, { leader: node === leader, changes })}\n`, stderr: '' };
    };
    const run = t.start(probe, { members: true, minMembers: 3 });
    const all = (await run.until((r) => r.status === 'ok')) as { value: EtcdValue };
    expect(all.value).toMatchObject({ leader: 'cp-1', leaderChanges: 0, quorum: true, hasLeader: true });
    expect(all.value.members).toEqual([
      { name: 'cp-1', up: true, leader: true },
      { name: 'cp-2', up: true, leader: false },
      { name: 'cp-3', up: true, leader: false },
    ]);
    expect(new Set(t.nodes.calls.map((c) => c.node))).toEqual(new Set(['cp-1', 'cp-2', 'cp-3']));
    // the leader goes; cp-2 is elected: quorum holds, but minMembers 3 is not met
    down.add('cp-1');
    leader = 'cp-2';
    changes = 2;
    const value = (r: { value: unknown }) => r.value as EtcdValue;
    const two = await run.until((r) => value(r).leader === 'cp-2');
    expect(two.status).toBe('violated');
    expect(two.detail).toMatch(
      /^2 of 3 member\(s\) answer, leader cp-2, 1 leader change\(s\) \(cp-1 does not answer: .*\): 2 member\(s\) answer, fewer than 3$/,
    );
    expect(two.value).toMatchObject({ quorum: true, leaderChanges: 1 });
    // a second member goes: no quorum, no leader
    down.add('cp-2');
    leader = 'none';
    const lost = await run.until((r) => value(r).quorum === false);
    expect(lost.status).toBe('violated');
    expect(lost.detail).toContain('no quorum: 1 of 3 member(s) answer, 2 needed');
  });

  it('with members: a quorum without a leader reads unknown while an election may be under way, violated after electionGrace', async () => {
    t = new ProbeTester({ inventory: haInventory });
    let leader = 'cp-1';
    t.nodes.handler = ({ node }) =>
      node === 'cp-1' && leader !== 'cp-1'
        ? { code: 0, stdout: '#unreachable curl: (7) Connection refused\n', stderr: '' }
        : { code: 0, stdout: `#health {"health":"true"}\n${metrics(100, 0.0015, { leader: node === leader })}\n`, stderr: '' };
    const run = t.start(probe, { members: true, interval: '1s', electionGrace: '5s' });
    await run.until((r) => r.status === 'ok');
    // the leader goes; the other two have not elected one yet
    leader = 'none';
    const electing = await run.until((r) => r.status !== 'ok');
    expect(electing.status).toBe('unknown');
    expect(electing.detail).toMatch(/no leader for .*: an election is under way/);
    // no leader past the grace: violated
    const lost = await run.until((r) => r.status === 'violated');
    expect(lost.detail).toMatch(/: no leader$/);
    expect(lost.at - electing.at).toBeGreaterThanOrEqual(4000);
    // a leader again: ok
    leader = 'cp-2';
    expect((await run.until((r) => r.status === 'ok')).value).toMatchObject({ leader: 'cp-2', quorum: true });
  });

  it('with members and no minimum: one member down of three reads ok', async () => {
    t = new ProbeTester({ inventory: haInventory });
    t.nodes.handler = ({ node }) =>
      node === 'cp-3'
        ? { code: 0, stdout: '#unreachable refused\n', stderr: '' }
        : { code: 0, stdout: `#health {"health":"true"}\n${metrics(100, 0.0015, { leader: node === 'cp-2' })}\n`, stderr: '' };
    const r = await t.start(probe, { members: true }).until((x) => x.status !== 'unknown');
    expect(r.status).toBe('ok');
    expect(r.value).toMatchObject({ leader: 'cp-2', quorum: true, healthy: true });
  });
});
