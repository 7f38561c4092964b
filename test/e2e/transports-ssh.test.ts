/**
 * The ssh transport against a real OpenSSH server on 127.0.0.1: a throwaway sshd with its own host key, a
 * dedicated user whose login shell is dash, and a generated client key. Needs root (it adds a user and runs
 * sshd); installs openssh-server/openssh-client with apt-get when missing. Never skips: missing
 * prerequisites fail the suite.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '../../src/contract/action.js';
import { registryOf } from '../../src/contract/registry.js';
import { KrError } from '../../src/core/errors.js';
import { assumeYes } from '../../src/engine/confirm.js';
import type { RunEvent } from '../../src/engine/events.js';
import { Journal, readJournal } from '../../src/journal/journal.js';
import { buildPlan } from '../../src/engine/static-checks.js';
import { startRun } from '../../src/engine/run.js';
import { Inventory, type InventoryNode, SshTransport } from '../../src/inventory/schema.js';
import { createNodeAccess } from '../../src/nodes/access.js';
import { realNodesCtx } from '../../src/testing/real-nodes-ctx.js';
import { realClock } from '../../src/core/clock.js';
import { fakeKubeAccess } from '../../src/testing/fake-access.js';
import { Runbook } from '../../src/runbook/schema.js';
import { shq } from '../../src/core/shell.js';
import { APT_WAIT } from '../../packages/lab/src/install/apt.js';
import { type SshConfig, sshTransport } from '../../src/nodes/ssh.js';
import { echoScript, hostileValues, markerExists, markerPath } from '../../src/testing/hostile.js';
import { eventually } from '../../src/testing/wait.js';
import { inventoryOf } from '../../src/testing/inventories.js';

const user = `krt${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'krt-sshd-'));
const node: InventoryNode = { name: 'ssh-node-1', address: '127.0.0.1', roles: ['worker'] };
let port = 0;
let sshd: ChildProcess | undefined;
let sshdLog = '';
let madePrivsepDir = false;
const file = (name: string) => join(dir, name);

const run = (cmd: string, args: string[], env?: NodeJS.ProcessEnv) =>
  execFileSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env } });
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${shq(cmd)}`]).status === 0;

function ensureOpenssh(): void {
  if (existsSync('/usr/sbin/sshd') && has('ssh') && has('ssh-keygen')) return;
  // Keep the package from starting a system-wide sshd: policy-rc.d says "no services" while we install.
  const policy = '/usr/sbin/policy-rc.d';
  const madePolicy = !existsSync(policy);
  if (madePolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const install = () =>
      spawnSync('apt-get', [...APT_WAIT, 'install', '-y', '--no-install-recommends', 'openssh-server', 'openssh-client'], {
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
        encoding: 'utf8',
      });
    let r = install();
    if (r.status !== 0) {
      spawnSync('apt-get', [...APT_WAIT, 'update'], { encoding: 'utf8' });
      r = install();
    }
    if (r.status !== 0) throw new Error(`cannot install openssh-server with apt-get: ${r.stderr.slice(-2000)}`);
  } finally {
    if (madePolicy) rmSync(policy, { force: true });
  }
  if (!existsSync('/usr/sbin/sshd')) throw new Error('apt-get installed openssh-server but /usr/sbin/sshd is missing');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const p = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(p));
    });
  });
}

const accepts = (p: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host: '127.0.0.1', port: p });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

const userPids = () => (spawnSync('pgrep', ['-u', user], { encoding: 'utf8' }).stdout ?? '').split('\n').filter(Boolean).map(Number);

const keyLine = (pub: string) => `[127.0.0.1]:${port} ${readFileSync(file(pub), 'utf8').trim().split(' ').slice(0, 2).join(' ')}\n`;

const config = (extra: Partial<SshConfig>): SshConfig => ({
  ...SshTransport.parse({ type: 'ssh' }),
  user,
  port,
  identityFile: file('client_key'),
  knownHostsFile: file('known_hosts'),
  connectTimeout: 5000,
  ...extra,
});

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the ssh transport tests add a user and run sshd: run them as root');
  ensureOpenssh();
  chmodSync(dir, 0o755);
  for (const key of ['host_key', 'other_host_key', 'client_key'])
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', key, '-f', file(key)]);
  writeFileSync(file('authorized_keys'), readFileSync(file('client_key.pub')), { mode: 0o644 });
  chmodSync(file('authorized_keys'), 0o644);
  run('useradd', ['--create-home', '--shell', '/bin/sh', '--password', '*', user]);
  if (!existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    madePrivsepDir = true;
  }
  port = await freePort();
  writeFileSync(
    file('sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${file('host_key')}`,
      `PidFile ${file('sshd.pid')}`,
      `AuthorizedKeysFile ${file('authorized_keys')}`,
      `AllowUsers ${user}`,
      'StrictModes no',
      'UsePAM no',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin no',
      'AllowTcpForwarding no',
      'AllowAgentForwarding no',
      'X11Forwarding no',
      'PermitTunnel no',
      'PrintMotd no',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  run('/usr/sbin/sshd', ['-t', '-f', file('sshd_config')]);
  await startSshd();
});

/** Starts the throwaway sshd and waits until it listens. */
async function startSshd(): Promise<void> {
  const d = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', file('sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
  sshd = d;
  d.stderr?.on('data', (b: Buffer) => (sshdLog += b.toString()));
  let up = false;
  for (let i = 0; i < 100 && !up && d.exitCode === null; i++) {
    up = await accepts(port);
    if (!up) await new Promise((r) => setTimeout(r, 100));
  }
  if (!up) throw new Error(`sshd did not listen on 127.0.0.1:${port}: ${sshdLog}`);
}

/** Stops the listening sshd (sessions already open go on, as with `systemctl restart ssh`). */
async function stopSshd(): Promise<void> {
  const d = sshd;
  if (!d || d.exitCode !== null) return;
  const gone = new Promise((r) => d.once('exit', r));
  d.kill('SIGTERM');
  await gone;
}

afterAll(async () => {
  await stopSshd();
  for (const pid of userPids()) process.kill(pid, 'SIGKILL');
  await eventually(() => userPids().length === 0);
  spawnSync('userdel', ['--remove', user], { encoding: 'utf8' });
  if (madePrivsepDir) rmSync('/run/sshd', { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

describe('ssh transport against a real sshd on 127.0.0.1', () => {
  it("runs scripts as the node's user, whose login shell is dash, with hostile values and input intact", async () => {
    writeFileSync(file('known_hosts'), keyLine('host_key.pub'));
    const ssh = sshTransport(config({}));
    const who = await ssh.exec(node, `id -un\ngetent passwd "$(id -un)" | cut -d: -f7\nreadlink -f /bin/sh\nreadlink -f /proc/$$/exe`);
    expect(who).toEqual({ code: 0, stdout: `${user}\n/bin/sh\n/usr/bin/dash\n/usr/bin/dash\n`, stderr: '' });

    const marker = markerPath();
    const values = hostileValues(marker);
    const { script, expected } = echoScript(values);
    const input = values.join('\n');
    const r = await ssh.exec(node, `${script}\ncat\necho "|end"`, { input, timeoutMs: 30_000 });
    expect(r).toEqual({ code: 0, stdout: `${expected}${input}|end\n`, stderr: '' });
    expect(markerExists(marker)).toBe(false);
    expect((await ssh.exec(node, 'exit 3')).code).toBe(3);
  });

  it('is reached through NodeAccess with the inventory settings', async () => {
    writeFileSync(file('known_hosts'), keyLine('host_key.pub'));
    const inv = Inventory.parse(
      inventoryOf(
        {
          layout: 'kubeadm',
          transport: { type: 'ssh', user, port, identityFile: file('client_key'), knownHostsFile: file('known_hosts') },
          nodes: [{ name: 'w1', address: '127.0.0.1' }],
        },
        'ssh-e2e',
      ),
    );
    const nodes = createNodeAccess(inv);
    expect(await nodes.exec('w1', 'cat; id -un', { input: 'hello ' })).toEqual({ code: 0, stdout: `hello ${user}\n`, stderr: '' });
  });

  it('refuses a host whose key is unknown when strictHostKeyChecking is yes', async () => {
    writeFileSync(file('known_hosts'), '');
    const marker = markerPath();
    await expect(sshTransport(config({})).exec(node, `touch ${shq(marker)}`)).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: expect.stringContaining('Host key verification failed'),
    });
    expect(markerExists(marker)).toBe(false);
    expect(readFileSync(file('known_hosts'), 'utf8')).toBe('');
  });

  it('trusts an unknown host on first use with accept-new, and remembers its key', async () => {
    writeFileSync(file('known_hosts'), '');
    const r = await sshTransport(config({ strictHostKeyChecking: 'accept-new' })).exec(node, 'echo first contact');
    expect(r).toEqual({ code: 0, stdout: 'first contact\n', stderr: '' });
    expect(readFileSync(file('known_hosts'), 'utf8')).not.toBe('');
    expect((await sshTransport(config({})).exec(node, 'echo known now')).stdout).toBe('known now\n');
  });

  it('refuses a host whose key changed, with yes and with accept-new', async () => {
    for (const strictHostKeyChecking of ['yes', 'accept-new'] as const) {
      writeFileSync(file('known_hosts'), keyLine('other_host_key.pub'));
      const marker = markerPath();
      await expect(sshTransport(config({ strictHostKeyChecking })).exec(node, `touch ${shq(marker)}`)).rejects.toMatchObject({
        code: 'NODE_UNREACHABLE',
        message: expect.stringContaining('Host key verification failed'),
      });
      expect(markerExists(marker)).toBe(false);
    }
  });

  it('kills the remote script when the timeout runs out, through the remote timeout', async () => {
    writeFileSync(file('known_hosts'), keyLine('host_key.pub'));
    const marker = markerPath();
    // HUP ignored: sshd's hang-up when the client goes away cannot end it, only the remote `timeout` can
    const script = `trap '' HUP\nsleep 40 & wait\ntouch ${shq(marker)}`;
    const pending = sshTransport(config({})).exec(node, script, { timeoutMs: 3000 });
    const outcome = pending.catch((e: unknown) => e);
    // the remote script is running...
    expect(await eventually(() => userPids().length > 0)).toBe(true);
    // ...the call gives up with a clear error...
    expect(await outcome).toMatchObject({ code: 'EXEC_TIMEOUT', message: expect.stringMatching(/"ssh-node-1" \(ssh\).*3s/) });
    // ...and nothing of it is left on the node (remote `timeout` + its 5s kill grace), nor did it finish.
    expect(await eventually(() => userPids().length === 0, 20_000)).toBe(true);
    expect(markerExists(marker)).toBe(false);
  });

  it('says a node is unreachable when nothing listens on its port', async () => {
    const closed = await freePort();
    await expect(sshTransport(config({ port: closed })).exec(node, 'true')).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: expect.stringMatching(/ssh-node-1.*Connection refused/),
    });
  });
});

/**
 * A fault the test user can apply without root: a file in its home on the node, removed by the revert. No node-side
 * dead-man (it would need /var/lib/kube-runbook on the node), so every ssh call of the run is a preflight, an apply
 * or a revert.
 */
const touchFile = defineAction({
  meta: {
    id: 'touch-file',
    summary: 'a file in the home of the ssh user',
    description: 'test',
    params: z.object({ tag: z.string() }),
    targets: 'nodes',
    kind: 'fault',
    undo: 'rm',
    access: [],
  },
  async prepare(ctx, params) {
    return { node: ctx.node!.name, file: `krt-fault-${params.tag}-${ctx.node!.name}` };
  },
  async apply(ctx, state) {
    const r = await ctx.nodes.exec(state.node, `touch "$HOME"/${shq(state.file)}`, { timeoutMs: 20_000, signal: ctx.signal });
    if (r.code !== 0) throw new KrError('TEST_APPLY_FAILED', `touch failed on ${state.node}: ${r.stderr}`);
    return state;
  },
  async revert(ctx, state) {
    const r = await ctx.nodes.exec(state.node, `rm -f "$HOME"/${shq(state.file)}`, { timeoutMs: 20_000, signal: ctx.signal });
    if (r.code !== 0) throw new KrError('TEST_REVERT_FAILED', `rm failed on ${state.node}: ${r.stderr}`);
  },
  nodeSideRevert: () => undefined,
});

describe('a run over ssh while sshd restarts', () => {
  it('reverts every fault once sshd is back: the reverts that met a stopped sshd are retried, no exit 4', async () => {
    writeFileSync(file('known_hosts'), keyLine('host_key.pub'));
    const tag = randomBytes(3).toString('hex');
    const inventory = Inventory.parse(
      inventoryOf(
        {
          layout: 'kubeadm',
          transport: {
            type: 'ssh',
            user,
            port,
            identityFile: file('client_key'),
            knownHostsFile: file('known_hosts'),
            connectTimeout: '3s',
          },
          nodes: [
            { name: 'n1', address: '127.0.0.1' },
            { name: 'n2', address: '127.0.0.1' },
          ],
        },
        'ssh-restart',
      ),
    );
    const runbook = Runbook.parse({
      apiVersion: 'kube-runbook/v1',
      kind: 'Runbook',
      metadata: { name: 'sshd-restart' },
      // both nodes at once: more than the default maxUnavailable of workers (50%), so the runbook says so
      spec: {
        safety: { allowContexts: ['lab'], faultTtl: '2m', maxUnavailable: { worker: '100%' } },
        steps: [{ action: 'touch-file', with: { tag, nodes: 'all' } }, { wait: '2s' }],
      },
    });
    const plan = await buildPlan({ runbook, file: 'sshd-restart.yaml', inventory, registry: registryOf([touchFile], []) });
    const faultFile = (n: string) => join('/home', user, `krt-fault-${tag}-${n}`);
    const journal = new Journal(file(`run-${tag}.jsonl`));

    // sshd goes down once both faults are applied, so the rollback's first attempts meet a closed port; it comes back
    // 1.5 s after the first failed attempt, while the run is still reverting
    const events: RunEvent[] = [];
    let stopping: Promise<void> | undefined;
    let restarting: Promise<void> | undefined;
    const emit = (e: RunEvent) => {
      events.push(e);
      if (e.type === 'fault-applied' && events.filter((x) => x.type === 'fault-applied').length === 2) stopping = stopSshd();
      if (e.type === 'attempt' && !restarting)
        restarting = (async () => {
          await stopping;
          await new Promise((r) => setTimeout(r, 1500));
          await startSshd();
        })();
    };
    const handle = startRun({
      plan,
      ctx: realNodesCtx(`ssh-restart-${tag}`, inventory, fakeKubeAccess(realClock, { context: 'lab' })),
      journal,
      emit,
      confirmer: assumeYes,
      inventoryFile: 'inventory.yaml',
    });
    const r = await handle.result;
    await restarting;

    expect(r).toMatchObject({ status: 'passed', exitCode: 0, remaining: [] });
    for (const n of ['n1', 'n2']) expect(existsSync(faultFile(n)), n).toBe(false);
    const reverted = events.filter((e): e is Extract<RunEvent, { type: 'fault-reverted' }> => e.type === 'fault-reverted');
    expect(reverted.map((e) => e.fault.node).sort()).toEqual(['n1', 'n2']);
    expect(reverted.every((e) => e.attempts > 1 && e.retried.every((k) => k === 'connection refusal'))).toBe(true);
    const view = readJournal(journal.file);
    expect(view.status).toBe('passed');
    for (const f of view.faults) {
      expect(f.reverted).toBe(true);
      expect(f.attempts.length).toBeGreaterThan(0);
      expect(f.attempts[0]).toMatchObject({
        op: 'revert',
        transient: 'connection refusal',
        error: expect.stringContaining('Connection refused'),
      });
    }
  });
});
