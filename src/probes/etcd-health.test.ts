import { afterEach, describe, expect, it } from 'vitest';
import { ProbeTester } from '../testing/probe-tester.js';
import probe, { type EtcdValue } from './etcd-health.js';

let t: ProbeTester;
afterEach(async () => t.close());

const LE = ['0.001', '0.002', '0.004', '0.008', '0.016', '0.032', '0.064', '0.128', '0.256', '0.512', '1.024', '2.048', '4.096', '8.192', '+Inf'];

/** etcd's metrics with `n` WAL fsyncs and commits so far, all of them taking about `seconds`. */
function metrics(n: number, seconds: number): string {
  const lines: string[] = [];
  for (const name of ['etcd_disk_wal_fsync_duration_seconds', 'etcd_disk_backend_commit_duration_seconds'])
    for (const le of LE) lines.push(`${name}_bucket{le="${le}"} ${le === '+Inf' || Number(le) >= seconds ? n : 0}`);
  lines.push('etcd_server_has_leader 1');
  return lines.join('\n');
}

describe('etcd-health', () => {
  it('scrapes through the etcd node and judges the p99 of the last interval', async () => {
    t = new ProbeTester();
    let writes = 1000;
    let latency = 0.0015;
    let answering = true;
    t.nodes.handler = () => {
      writes += 100;
      if (!answering) return { code: 0, stdout: '#unreachable curl: (7) Failed to connect to 127.0.0.1 port 2379: Connection refused\n', stderr: '' };
      return { code: 0, stdout: `#health {"health":"true"}\n${metrics(writes, latency)}\n`, stderr: '' };
    };
    const run = t.start(probe, {});
    const ok = await run.until((r) => r.status === 'ok');
    expect(ok.value).toEqual({ healthy: true, hasLeader: true, walFsyncP99Ms: 2, backendCommitP99Ms: 2 } satisfies EtcdValue);
    expect(t.nodes.calls[0]?.node).toBe('cp-1');
    expect(t.nodes.calls[0]?.script).toContain('fetch http://127.0.0.1:2379/metrics |');
    latency = 1.5; // a throttled disk: new writes take 1.5 s
    const slow = await run.until((r) => r.status === 'violated');
    expect(slow.detail).toBe('healthy, WAL fsync p99 2037.8ms, backend commit p99 2037.8ms: WAL fsync p99 above 100ms; backend commit p99 above 250ms');
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
});
