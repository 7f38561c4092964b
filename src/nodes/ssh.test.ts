import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inventory, type InventoryNode, SshTransport } from '../inventory/schema.js';
import { type SshConfig, remoteCommand, sshArgv, sshTransient, sshTransport } from './ssh.js';
import { echoScript, hostileValues, markerExists, markerPath } from '../testing/hostile.js';
import { inventoryOf } from '../testing/inventories.js';

const config = (extra: Partial<SshConfig> = {}): SshConfig => ({ ...SshTransport.parse({ type: 'ssh' }), ...extra });
const node = (extra: Partial<InventoryNode> = {}): InventoryNode => ({ name: 'node-1', roles: ['worker'], ...extra });

describe('sshArgv', () => {
  it('fails instead of prompting, checks host keys, forwards nothing and ends options before the destination', () => {
    expect(sshArgv(config({ user: 'ops' }), node({ address: '10.0.0.5' }))).toEqual([
      '-T',
      '-o',
      'BatchMode=yes',
      '-o',
      'ConnectTimeout=10',
      '-o',
      'ServerAliveInterval=5',
      '-o',
      'ServerAliveCountMax=3',
      '-o',
      'StrictHostKeyChecking=yes',
      '-o',
      'LogLevel=ERROR',
      '-o',
      'ClearAllForwardings=yes',
      '-o',
      'ForwardAgent=no',
      '-o',
      'ForwardX11=no',
      '-o',
      'GSSAPIDelegateCredentials=no',
      '-o',
      'PermitLocalCommand=no',
      '-o',
      'ControlMaster=no',
      '-o',
      'ControlPath=none',
      '--',
      'ops@10.0.0.5',
      'sh -s',
    ]);
  });

  it('forwards no agent, X11 or ports even when the ssh config asks for them (ssh -G shows what it would do)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-ssh-g-'));
    try {
      const cfg = join(dir, 'config');
      writeFileSync(
        cfg,
        'Host *\n  ForwardAgent yes\n  ForwardX11 yes\n  LocalForward 8080 localhost:80\n  ControlMaster auto\n  ControlPath /tmp/cm-%r@%h\n  GSSAPIDelegateCredentials yes\n',
      );
      const argv = sshArgv(config({ user: 'ops' }), node({ address: '10.0.0.5' }));
      const options = argv.slice(0, argv.indexOf('--'));
      const effective = execFileSync('ssh', ['-G', '-F', cfg, ...options, 'ops@10.0.0.5'], { encoding: 'utf8' });
      expect(effective).toMatch(/^forwardagent no$/m);
      expect(effective).toMatch(/^forwardx11 no$/m);
      expect(effective).toMatch(/^clearallforwardings yes$/m);
      expect(effective).toMatch(/^controlmaster false$/m);
      expect(effective).toMatch(/^gssapidelegatecredentials no$/m);
      expect(effective).not.toMatch(/^controlpath /m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('passes the inventory settings as separate arguments', () => {
    const argv = sshArgv(
      config({
        port: 2222,
        identityFile: '/keys/id ed25519',
        knownHostsFile: '/etc/kube-runbook/known_hosts',
        strictHostKeyChecking: 'accept-new',
        connectTimeout: 2500,
        jumpHost: 'bastion@jump.example.com:2200,j2',
      }),
      node({ name: 'w1.example.com' }),
    );
    expect(argv.join(' ')).toContain('-o ConnectTimeout=3 ');
    expect(argv.join(' ')).toContain('-o StrictHostKeyChecking=accept-new ');
    expect(argv).toEqual(expect.arrayContaining(['-o', 'UserKnownHostsFile=/etc/kube-runbook/known_hosts']));
    expect(argv.slice(argv.indexOf('-i'), argv.indexOf('-i') + 2)).toEqual(['-i', '/keys/id ed25519']);
    expect(argv.slice(argv.indexOf('-p'), argv.indexOf('-p') + 2)).toEqual(['-p', '2222']);
    expect(argv).not.toContain('-J');
    expect(argv.find((a) => a.startsWith('ProxyCommand='))).toMatch(/ -W '\[%h\]:%p' -- j2$/);
    expect(argv.slice(-3)).toEqual(['--', 'w1.example.com', 'sh -s']);
  });

  it('ignores the user ssh config when asked, for the node and the jump hosts, which get the same options', () => {
    const c = config({
      ignoreUserConfig: true,
      knownHostsFile: '/etc/kr/known_hosts',
      identityFile: '/keys/id',
      jumpHost: 'bastion@jump-1:2200,[fd00::9]',
    });
    const argv = sshArgv(c, node({ address: '10.0.0.5' }));
    expect(argv.slice(0, 3)).toEqual(['-T', '-F', 'none']);
    const proxy = argv.find((a) => a.startsWith('ProxyCommand='))!.slice('ProxyCommand='.length);
    // what the node's ssh runs for the last hop, as ssh would: tokens expanded, then through the shell
    const words = (cmd: string, h: string, p: string) => {
      const expanded = cmd.replace(/%(%|h|p)/g, (_, t: string) => (t === '%' ? '%' : t === 'h' ? h : p));
      return execFileSync('sh', ['-c', `for w in ${expanded.replace(/^ssh /, '')}; do printf '%s\\0' "$w"; done`], { encoding: 'utf8' })
        .split('\0')
        .slice(0, -1);
    };
    const last = words(proxy, '10.0.0.5', '22');
    const same = [
      '-F',
      'none',
      '-o',
      'BatchMode=yes',
      '-o',
      'StrictHostKeyChecking=yes',
      '-o',
      'UserKnownHostsFile=/etc/kr/known_hosts',
      '-i',
      '/keys/id',
      '-o',
      'IdentitiesOnly=yes',
    ];
    for (const w of same) expect(last).toContain(w);
    expect(last.slice(-4)).toEqual(['-W', '[10.0.0.5]:22', '--', 'fd00::9']);
    const inner = last[last.indexOf('-W') - 1]!;
    expect(inner.startsWith('ProxyCommand=')).toBe(true);
    const first = words(inner.slice('ProxyCommand='.length), 'fd00::9', '22');
    for (const w of same) expect(first).toContain(w);
    expect(first.slice(-6)).toEqual(['-p', '2200', '-W', '[fd00::9]:22', '--', 'bastion@jump-1']);
    expect(sshArgv(config(), node())).not.toContain('none');
  });

  it('builds the remote command from constants and numbers only', () => {
    expect(remoteCommand({ sudo: false })).toBe('sh -s');
    expect(remoteCommand({ sudo: false }, 2500)).toBe('timeout -k 5 3 sh -s');
    expect(remoteCommand({ sudo: true }, 120_000)).toBe('sudo -n timeout -k 5 120 sh -s');
    expect(remoteCommand({ sudo: true }, 1)).toBe('sudo -n timeout -k 5 1 sh -s');
  });

  it('refuses addresses, users and paths that ssh could take for options or that hold blanks, quoting them', () => {
    const bad: [Partial<SshConfig>, Partial<InventoryNode>, string][] = [
      [{}, { address: '-oProxyCommand=touch /tmp/x' }, '-oProxyCommand=touch /tmp/x'],
      [{}, { address: 'host name' }, 'host name'],
      [{}, { address: 'host\nname' }, 'host\nname'],
      [{}, { address: 'evil@host' }, 'evil@host'],
      [{}, { address: '$(touch /tmp/x)' }, '$(touch /tmp/x)'],
      [{}, { name: '-F/tmp/cfg' }, '-F/tmp/cfg'],
      [{ user: '-oProxyCommand=x' }, {}, '-oProxyCommand=x'],
      [{ user: 'a b' }, {}, 'a b'],
      [{ user: 'root@other' }, {}, 'root@other'],
      [{ user: 'ops\t' }, {}, 'ops\t'],
      [{ knownHostsFile: '/tmp/kh /etc/passwd' }, {}, '/tmp/kh /etc/passwd'],
      [{ knownHostsFile: '-x' }, {}, '-x'],
      [{ identityFile: '-oProxyCommand=x' }, {}, '-oProxyCommand=x'],
      [{ identityFile: 'key\n' }, {}, 'key\n'],
      [{ jumpHost: '-oProxyCommand=x' }, {}, '-oProxyCommand=x'],
      [{ jumpHost: 'a b' }, {}, 'a b'],
      [{ jumpHost: 'ok,-bad' }, {}, 'ok,-bad'],
    ];
    for (const [c, n, value] of bad)
      expect(() => sshArgv(config(c), node(n)), JSON.stringify(value)).toThrow(
        expect.objectContaining({ code: 'BAD_SSH_TARGET', exit: 2, message: expect.stringContaining(`(got ${JSON.stringify(value)})`) }),
      );
    expect(sshArgv(config({ user: 'svc_k8s-1' }), node({ address: 'fe80::1%eth0' })).at(-2)).toBe('svc_k8s-1@fe80::1%eth0');
  });

  it('takes its settings from an inventory as parsed', () => {
    const inv = Inventory.parse(
      inventoryOf(
        { layout: 'kubeadm', transport: { type: 'ssh', user: 'ops', connectTimeout: '4s', sudo: true }, nodes: [{ name: 'cp-1' }] },
        'prod',
      ),
    );
    const t = inv.spec.transport;
    if (t.type !== 'ssh') throw new Error('expected ssh');
    const argv = sshArgv(t, inv.spec.nodes[0]!, 30_000);
    expect(argv).toContain('ConnectTimeout=4');
    expect(argv.slice(-2)).toEqual(['ops@cp-1', 'sudo -n timeout -k 5 30 sh -s']);
  });
});

describe('sshTransient', () => {
  it('calls refused, reset, timed-out and lost connections transient, naming each', () => {
    const cases: [string, string][] = [
      ['kex_exchange_identification: read: Connection reset by peer\r\nConnection reset by 127.0.0.1 port 2222', 'connection reset'],
      ['ssh: connect to host 10.0.0.7 port 22: Connection refused', 'connection refusal'],
      ['ssh: connect to host 10.0.0.7 port 22: Connection timed out', 'connection timeout'],
      ['Timeout, server 10.0.0.7 not responding.', 'connection timeout'],
      ['ssh: Could not resolve hostname node-1: Temporary failure in name resolution', 'name resolution failure'],
      ['ssh: connect to host 10.0.0.7 port 22: No route to host', 'unreachable network'],
      ['Connection closed by 10.0.0.7 port 22', 'lost connection'],
      ['client_loop: send disconnect: Broken pipe', 'lost connection'],
      ['', 'lost connection'],
    ];
    for (const [stderr, kind] of cases) expect(sshTransient(stderr), stderr).toBe(kind);
  });

  it('calls host key, authentication and configuration failures permanent', () => {
    for (const stderr of [
      'No ED25519 host key is known for node-1.\nHost key verification failed.',
      '@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.',
      'ops@10.0.0.7: Permission denied (publickey).',
      'Received disconnect from 10.0.0.7 port 22:2: Too many authentication failures',
      'Warning: Identity file /k not accessible: No such file or directory.\nno such identity: /k: No such file or directory\nops@10.0.0.7: Permission denied (publickey).',
      'command-line line 0: Bad configuration option: foo',
      'ssh: Could not resolve hostname nodee-1: Name or service not known',
    ])
      expect(sshTransient(stderr), stderr).toBeUndefined();
  });
});

/**
 * A stand-in `ssh` on PATH: records its argv and stdin, then does what sshd would do with the remote
 * command (hand it to the login shell, dash here) or fails like an unreachable host.
 */
describe('ssh transport through a stand-in ssh client', () => {
  const dir = mkdtempSync(join(tmpdir(), 'krt-ssh-'));
  const path = process.env.PATH;
  beforeAll(() => {
    writeFileSync(
      join(dir, 'ssh'),
      [
        '#!/bin/sh',
        `printf '%s\\0' "$@" > ${dir}/argv`,
        `cat > ${dir}/stdin`,
        `if [ -e ${dir}/unreachable ]; then printf 'No ED25519 host key is known for node-1.\\nHost key verification failed.\\n' >&2; exit 255; fi`,
        `if [ -e ${dir}/restarting ]; then echo 'ssh: connect to host node-1 port 22: Connection refused' >&2; exit 255; fi`,
        'for last; do :; done',
        `exec /bin/sh -c "$last" < ${dir}/stdin`,
      ].join('\n'),
    );
    chmodSync(join(dir, 'ssh'), 0o755);
    process.env.PATH = `${dir}:${path}`;
  });
  afterAll(() => {
    process.env.PATH = path;
    rmSync(dir, { recursive: true, force: true });
  });
  const seenArgv = () => readFileSync(join(dir, 'argv'), 'utf8').split('\0').slice(0, -1);
  const ssh = sshTransport(config({ user: 'ops' }), { killGraceMs: 300 });

  it('sends the script and hostile values on stdin only, and they come back byte for byte', async () => {
    const marker = markerPath();
    const values = hostileValues(marker);
    const { script, expected } = echoScript(values);
    const input = values.join('\n');
    const r = await ssh.exec(node(), `${script}\ncat`, { input, timeoutMs: 20_000 });
    expect(r).toEqual({ code: 0, stdout: expected + input, stderr: '' });
    expect(seenArgv()).toEqual(sshArgv(config({ user: 'ops' }), node(), 20_000));
    expect(seenArgv().join('\n')).not.toContain(marker);
    expect(readFileSync(join(dir, 'stdin'), 'utf8')).toContain(marker);
    expect(markerExists(marker)).toBe(false);
  });

  /** `true` run while the stub ssh fails as `how` says (`unreachable`: a host key unknown; `restarting`: refused). */
  async function failingAs(how: 'unreachable' | 'restarting'): Promise<unknown> {
    writeFileSync(join(dir, how), '');
    try {
      return await ssh.exec(node(), 'true');
    } finally {
      rmSync(join(dir, how));
    }
  }

  it("returns the script's own exit codes", async () => {
    expect(await ssh.exec(node(), 'echo no >&2; exit 254')).toEqual({ code: 254, stdout: '', stderr: 'no\n' });
  });

  it("throws NODE_UNREACHABLE with ssh's reason when ssh itself fails (exit 255)", async () => {
    await expect(failingAs('unreachable')).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: 'cannot reach node "node-1" over ssh (ops@node-1): Host key verification failed.',
      details: ['No ED25519 host key is known for node-1.'],
      transient: undefined,
    });
  });

  it('throws NODE_UNREACHABLE as transient when the connection is refused', async () => {
    await expect(failingAs('restarting')).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: 'cannot reach node "node-1" over ssh (ops@node-1): ssh: connect to host node-1 port 22: Connection refused',
      transient: 'connection refusal',
    });
  });

  it('kills the ssh client on timeout', async () => {
    const run = ssh.exec(node(), 'sleep 60', { timeoutMs: 500 });
    await expect(run).rejects.toMatchObject({ code: 'EXEC_TIMEOUT', message: expect.stringMatching(/"node-1" \(ssh\).*500ms/) });
    expect(seenArgv().at(-1)).toBe('timeout -k 5 1 sh -s');
  });
});
