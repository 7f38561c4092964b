import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InventoryNode } from '../inventory/schema.js';
import { netnsOf, netnsTransient, netnsTransport } from './netns.js';
import { spawnSync } from 'node:child_process';
import { shq } from '../core/shell.js';
import { echoScript, hostileValues, markerExists, markerPath } from '../testing/hostile.js';
import { alive, pidsIn } from '../testing/procs.js';
import { eventually } from '../testing/wait.js';

const ns = `krt-${randomBytes(4).toString('hex')}`;
const node: InventoryNode = { name: 'node-7', netns: ns, roles: ['worker'] };
const netns = netnsTransport({ killGraceMs: 300 });
const dir = mkdtempSync(join(tmpdir(), 'krt-netns-'));

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('the netns transport tests create a network namespace and must run as root');
  execFileSync('ip', ['netns', 'add', ns]);
});
afterAll(() => {
  execFileSync('ip', ['netns', 'delete', ns]);
  rmSync(dir, { recursive: true, force: true });
});

const inode = (path: string) => execFileSync('stat', ['-L', '-c', '%i', path], { encoding: 'utf8' }).trim();

describe('netns transport', () => {
  it("runs the script inside the node's network namespace, as dash", async () => {
    const r = await netns.exec(node, 'stat -L -c %i /proc/self/ns/net\nreadlink -f /proc/$$/exe\nip -o link show | wc -l');
    expect(r.code).toBe(0);
    const [inside, shell, links] = r.stdout.trim().split('\n');
    expect(inside).toBe(inode(`/run/netns/${ns}`));
    expect(inside).not.toBe(inode('/proc/self/ns/net'));
    expect(shell).toBe('/usr/bin/dash');
    expect(links).toBe('1'); // a fresh namespace has only lo
  });

  it('uses the node name as the namespace when the node does not name one', async () => {
    const r = await netns.exec({ name: ns, roles: ['worker'] }, 'stat -L -c %i /proc/self/ns/net');
    expect(r.stdout.trim()).toBe(inode(`/run/netns/${ns}`));
  });

  it('passes hostile values and hostile input through byte for byte, running none of them', async () => {
    const marker = markerPath();
    const values = hostileValues(marker);
    const { script, expected } = echoScript(values);
    const r = await netns.exec(node, script);
    expect(r).toEqual({ code: 0, stdout: expected, stderr: '' });
    const input = values.join('\n');
    const echoed = await netns.exec(node, 'cat; echo "|end"', { input });
    expect(echoed.stdout).toBe(`${input}|end\n`);
    expect(markerExists(marker)).toBe(false);
  });

  it('kills the script and its children on timeout, naming the node and the limit', async () => {
    const pids = join(dir, 'pids');
    const run = netns.exec(node, `sleep 60 & echo $! > ${shq(pids)}\necho $$ >> ${shq(pids)}\nwait`, { timeoutMs: 2000 });
    await expect(run).rejects.toMatchObject({ code: 'EXEC_TIMEOUT', message: expect.stringMatching(/"node-7".*netns.*2s/) });
    for (const pid of await pidsIn(pids, 2)) expect(await eventually(() => !alive(pid))).toBe(true);
  });

  it('says a node is unreachable when its namespace does not exist', async () => {
    const run = netns.exec({ name: 'node-x', netns: `${ns}-missing`, roles: ['worker'] }, 'true');
    await expect(run).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: expect.stringContaining(`${ns}-missing`),
      transient: undefined,
    });
  });

  it("calls ip's failure to enter a namespace transient, and the script's own exit codes permanent", () => {
    const ip = spawnSync('ip', ['netns', 'exec', `${ns}-missing`, 'true'], { encoding: 'utf8' });
    expect(ip.status).toBe(255);
    expect(netnsTransient({ code: 255, stdout: '', stderr: ip.stderr })).toBe('namespace entry failure');
    expect(netnsTransient({ code: 255, stdout: '', stderr: 'setting the network namespace "n1" failed: Invalid argument\n' })).toBe(
      'namespace entry failure',
    );
    expect(netnsTransient({ code: 255, stdout: '', stderr: 'the script said so\n' })).toBeUndefined();
    expect(netnsTransient({ code: 1, stdout: '', stderr: ip.stderr })).toBeUndefined();
  });

  it("runs a node's scripts in its own mount namespace too: the same path is each node's own, not this machine's", async () => {
    // two nodes, as a kubeadm lab's: each binds its own directory at one path (kubeadm's /etc/kubernetes)
    const at = join(dir, 'etc-kubernetes');
    const keep = join(dir, 'mnt');
    mkdirSync(at);
    mkdirSync(keep);
    execFileSync('mount', ['--bind', keep, keep]);
    execFileSync('mount', ['--make-private', keep]);
    const nodes = ['cp-1', 'cp-2'].map((name) => {
      const own = join(dir, `${name}-kubernetes`);
      mkdirSync(own);
      writeFileSync(join(own, 'node'), name);
      const mountns = join(keep, name);
      writeFileSync(mountns, '');
      execFileSync('unshare', [`--mount=${mountns}`, '--propagation', 'slave', 'mount', '--bind', own, at]);
      return { name, netns: ns, mountns, roles: ['control-plane'] } satisfies InventoryNode;
    });
    try {
      for (const n of nodes) {
        const r = await netns.exec(n, `cat ${shq(join(at, 'node'))}; echo; stat -L -c %i /proc/self/ns/net`);
        expect(r.stdout.trim().split('\n')).toEqual([n.name, inode(`/run/netns/${ns}`)]);
      }
      expect(existsSync(join(at, 'node')), "this machine's own path").toBe(false);
      // a file that is no namespace (a node torn down): entering it fails, and can pass once the node is back
      const gone = join(dir, 'not-a-namespace');
      writeFileSync(gone, '');
      await expect(netns.exec({ ...nodes[0]!, mountns: gone }, 'true')).rejects.toMatchObject({
        code: 'NODE_UNREACHABLE',
        message: expect.stringContaining('cannot enter namespaces'),
        transient: 'namespace entry failure',
      });
      // no such file: the node is not on this machine
      await expect(netns.exec({ ...nodes[0]!, mountns: join(dir, 'missing') }, 'true')).rejects.toMatchObject({
        code: 'NODE_UNREACHABLE',
        message: expect.stringContaining('no mount namespace file'),
        transient: undefined,
      });
      // the script's own exit 1, with nsenter's words in its output, stays the script's
      const own = await netns.exec(nodes[0]!, 'echo "nsenter: cannot open /x: it\'s the script" >&2; exit 1');
      expect(own.code).toBe(1);
    } finally {
      for (const n of nodes) execFileSync('umount', [n.mountns]);
      execFileSync('umount', [keep]);
    }
  });

  it('refuses namespace names that are not plain names, quoting them', () => {
    for (const bad of ['-n', '../etc', '.', '..', 'a b', 'a/b', '$(touch x)', 'a\nb', "it's"]) {
      expect(() => netnsOf({ name: 'n', netns: bad, roles: ['worker'] }), bad).toThrow(
        expect.objectContaining({ code: 'BAD_NETNS_NAME', message: expect.stringContaining(JSON.stringify(bad)) }),
      );
    }
    expect(netnsOf({ name: 'node-1.zone_a', roles: ['worker'] })).toBe('node-1.zone_a');
  });
});
