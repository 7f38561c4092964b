import type { z } from 'zod';
import { redactText } from '../core/redact.js';
import { shCommand } from '../core/shell.js';
import { EXIT, KrError, quote } from '../core/errors.js';
import type { InventoryNode, SshTransport } from '../inventory/schema.js';
import { runProcess, type TransportDeps } from './exec-process.js';
import type { ExecOptions, ExecResult, Transport } from './types.js';
import { wireScript } from './wire.js';

export type SshConfig = z.output<typeof SshTransport>;

/** Seconds the remote `timeout` waits after SIGTERM before SIGKILL. */
const REMOTE_KILL_AFTER_S = 5;

const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/;
const HOST = /^[A-Za-z0-9_:][A-Za-z0-9_.:%-]*$/;
const JUMP = /^(?:([A-Za-z0-9_][A-Za-z0-9_.-]*)@)?(\[[0-9A-Fa-f:.%A-Za-z]+\]|[A-Za-z0-9_][A-Za-z0-9_.-]*)(?::(\d{1,5}))?$/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The ssh client's argv for one call: options that make it fail instead of prompting or trusting an
 * unknown host, then `--`, the destination and a remote command made only of constants and numbers.
 */
export function sshArgv(config: SshConfig, node: InventoryNode, timeoutMs?: number): string[] {
  const host = node.address ?? node.name;
  check(node, 'address', host, HOST.test(host) && host.length <= 253);
  if (config.user !== undefined) check(node, 'ssh user', config.user, USER.test(config.user) && config.user.length <= 64);
  const argv = ['-T', ...connectionOptions(config, node)];
  if (config.port !== undefined) argv.push('-p', String(config.port));
  if (config.jumpHost !== undefined) {
    const j = config.jumpHost;
    const hops = j.split(',').map((hop) => JUMP.exec(hop));
    check(
      node,
      'jumpHost',
      j,
      hops.every((m) => m !== null),
    );
    argv.push('-o', `ProxyCommand=${jumpCommand(config, node, hops as RegExpExecArray[])}`);
  }
  argv.push('--', config.user === undefined ? host : `${config.user}@${host}`, remoteCommand(config, timeoutMs));
  return argv;
}

/**
 * The jump hosts, as a ProxyCommand: each hop an ssh client with the same options as the node's connection (host
 * keys checked against the same known_hosts, BatchMode, the same identity, the user's config ignored when it is for
 * the node), instead of `-J`, which reaches them with the user's ssh configuration only. Hops nest as OpenSSH's own
 * ProxyJump does (`-W '[%h]:%p'`), each inner command's `%` doubled so only its own ssh expands it.
 */
function jumpCommand(config: SshConfig, node: InventoryNode, hops: RegExpExecArray[]): string {
  let command: string | undefined;
  for (const [, user, host, port] of hops) {
    const words = ['ssh', '-T', ...connectionOptions(config, node)];
    if (command !== undefined) words.push('-o', `ProxyCommand=${command.replaceAll('%', '%%')}`);
    if (port !== undefined) words.push('-p', port);
    const h = host!.replace(/^\[(.*)\]$/, '$1');
    words.push('-W', '[%h]:%p', '--', user === undefined ? h : `${user}@${h}`);
    command = shCommand(...words);
  }
  return command!;
}

/** The options of every connection: to the node and to each jump host. */
function connectionOptions(config: SshConfig, node: InventoryNode): string[] {
  const options = [
    'BatchMode=yes',
    `ConnectTimeout=${Math.max(1, Math.ceil(config.connectTimeout / 1000))}`,
    'ServerAliveInterval=5',
    'ServerAliveCountMax=3',
    `StrictHostKeyChecking=${config.strictHostKeyChecking}`,
    'LogLevel=ERROR',
    // No credential or channel leaves with the connection, whatever the user's ssh config says (options on the
    // command line win over it): no agent (-a), no X11 (-x), no Kerberos delegation, no port forwarding, no
    // LocalCommand, and no multiplexed master that an earlier ssh may have opened with forwarding on.
    'ClearAllForwardings=yes',
    'ForwardAgent=no',
    'ForwardX11=no',
    'GSSAPIDelegateCredentials=no',
    'PermitLocalCommand=no',
    'ControlMaster=no',
    'ControlPath=none',
  ];
  const argv = [...(config.ignoreUserConfig ? ['-F', 'none'] : []), ...options.flatMap((o) => ['-o', o])];
  if (config.knownHostsFile !== undefined) {
    const f = config.knownHostsFile;
    check(node, 'knownHostsFile', f, !f.startsWith('-') && !CONTROL.test(f) && !/[\s"'\\]/.test(f));
    argv.push('-o', `UserKnownHostsFile=${f}`);
  }
  if (config.identityFile !== undefined) {
    const f = config.identityFile;
    check(node, 'identityFile', f, !f.startsWith('-') && !CONTROL.test(f));
    argv.push('-i', f, '-o', 'IdentitiesOnly=yes');
  }
  return argv;
}

/** What the node's login shell runs: `[sudo -n] [timeout -k 5 <s>] sh -s`. Only constants and numbers. */
export function remoteCommand(config: Pick<SshConfig, 'sudo'>, timeoutMs?: number): string {
  const words: string[] = [];
  if (config.sudo) words.push('sudo', '-n');
  if (timeoutMs !== undefined) words.push('timeout', '-k', String(REMOTE_KILL_AFTER_S), String(Math.max(1, Math.ceil(timeoutMs / 1000))));
  words.push('sh', '-s');
  return words.join(' ');
}

/**
 * OpenSSH. The script goes on stdin to a fixed remote command; host keys are checked (`yes` by default);
 * a timeout kills the ssh client here and, through `timeout`, the script on the node (an abort kills the
 * client only; sshd then hangs up the session, which ends scripts that do not ignore SIGHUP). ssh's own exit
 * code 255 (cannot connect, host key refused, authentication failed, connection lost) throws
 * KrError `NODE_UNREACHABLE`, transient or not as `sshTransient` says; so a script should not exit 255 itself over ssh.
 *
 * Jump hosts are reached with the same options (see jumpCommand); `ignoreUserConfig` (`-F none`) leaves the user's
 * ~/.ssh/config out of every connection (its ProxyCommand, ForwardAgent, Host aliases).
 */
export function sshTransport(config: SshConfig, deps: TransportDeps = {}): Transport {
  return {
    kind: 'ssh',
    async exec(node: InventoryNode, script: string, options: ExecOptions = {}): Promise<ExecResult> {
      const argv = sshArgv(config, node, options.timeoutMs);
      const r = await runProcess(
        {
          argv: ['ssh', ...argv],
          stdin: wireScript(script, options.input),
          node: node.name,
          transport: 'ssh',
          timeoutMs: options.timeoutMs,
          signal: options.signal,
          // never a graphical passphrase prompt either (there is no terminal to prompt on)
          env: { SSH_ASKPASS_REQUIRE: 'never' },
        },
        deps,
      );
      if (r.code !== 255) return r;
      const where = `${config.user === undefined ? '' : `${config.user}@`}${node.address ?? node.name}${config.port ? `:${config.port}` : ''}`;
      throw sshError(node.name, where, r.stderr);
    },
  };
}

/** What ssh says when the cause is settled (keys, names, configuration): trying again cannot help. */
const SSH_PERMANENT =
  /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|Permission denied|Too many authentication failures|no such identity|Bad configuration option|Bad owner or permissions|Could not resolve hostname .*(?:Name or service not known|No address associated)|Load key .*: invalid format/i;

/** ssh's own failures (exit 255) that can pass, most telling first. */
const SSH_TRANSIENT: [RegExp, string][] = [
  [/Connection reset/i, 'connection reset'],
  [/Connection refused/i, 'connection refusal'],
  [/timed out|Timeout, server .* not responding/i, 'connection timeout'],
  [/Temporary failure in name resolution/i, 'name resolution failure'],
  [/No route to host|Network is unreachable/i, 'unreachable network'],
];

/**
 * Whether ssh's own failure (exit 255), from what it said on stderr, can pass: a refused, reset, timed-out or lost
 * connection can (sshd restarting, a network blip); a host key, authentication or configuration failure cannot.
 * The one place that decides it for the ssh transport. Returns the failure's kind, or undefined when permanent.
 */
export function sshTransient(stderr: string): string | undefined {
  if (SSH_PERMANENT.test(stderr)) return undefined;
  return SSH_TRANSIENT.find(([re]) => re.test(stderr))?.[1] ?? 'lost connection';
}

/** ssh's own failure (exit 255) as an error: the last and first things ssh said, and whether trying again can help. */
export function sshError(nodeName: string, where: string, stderr: string): KrError {
  // redacted whole, so a secret over several lines (a PEM key) goes as a whole
  const lines = redactText(stderr)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^@+$/.test(l))
    .map((l) => l.slice(0, 300));
  const last = lines.at(-1) ?? 'ssh exited with 255 and said nothing';
  const first = lines[0];
  return new KrError('NODE_UNREACHABLE', `cannot reach node ${quote(nodeName)} over ssh (${where}): ${last}`, {
    details: first !== undefined && first !== last ? [first] : [],
    transient: sshTransient(stderr),
  });
}

function check(node: InventoryNode, what: string, value: string, ok: boolean): void {
  if (!ok)
    throw new KrError('BAD_SSH_TARGET', `node ${quote(node.name)}: the ${what} is not usable with ssh (got ${quote(value)})`, {
      exit: EXIT.invalid,
    });
}
