import { constants } from 'node:os';
import type { Readable } from 'node:stream';
import { $, which } from 'zx/core';
import { realClock, type Clock } from '../core/clock.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { shq } from '../core/shell.js';
import type { ExecResult } from './types.js';

/** What every transport is built with. */
export interface TransportDeps {
  log?: Logger;
  clock?: Clock;
  /** Bytes of stdout and of stderr kept per call (1 MiB each by default); the rest is counted and dropped. */
  maxOutputBytes?: number;
  /** How long a killed script gets between SIGTERM and SIGKILL (2s by default). */
  killGraceMs?: number;
}

const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

export interface ProcessSpec {
  /** Program and arguments; each word reaches the program as it is (quoted with `shq`, run with `exec`). */
  argv: readonly [string, ...string[]];
  /** Written to the process's stdin, which is then closed. */
  stdin: string;
  /** For messages: the node and the transport. */
  node: string;
  transport: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Added to this process's environment. */
  env?: Record<string, string>;
}

/** How long to keep reading after the process exited, for output still in the pipes or held by its background children. */
const DRAIN_MS = 300;

/** Errors of starting a process that can pass (the machine is short of processes or files for a moment). */
const SPAWN_TRANSIENT: Record<string, string> = {
  EAGAIN: 'process start failure',
  ENOMEM: 'process start failure',
  EMFILE: 'process start failure',
  ENFILE: 'process start failure',
};

/** Whether a failure to start the transport's program can pass: decided here for every transport that runs one. */
export function spawnTransient(errno: string | undefined): string | undefined {
  return errno === undefined ? undefined : SPAWN_TRANSIENT[errno];
}

/**
 * Runs a program through zx in a process group of its own, feeds it `stdin`, keeps bounded stdout and stderr.
 * zx gives the process API: the argv quoted into one `exec` line for /bin/sh (with our `shq`, POSIX quoting, so
 * dash can run it: zx's own quoting is bash's), stdin written and closed, output into a store we hand it (capped
 * here), a detached process group, the group killed when its signal aborts, and nothing thrown on a non-zero exit.
 *
 * What stays ours, and why: the timeout and the SIGKILL after the grace run on the injected clock (zx's `timeout`
 * uses the real setTimeout, so a fake clock could not drive it, and zx's `kill` lists the process tree with `ps`
 * first); zx settles only when the pipes close, which a background child of the script can hold open for ever,
 * so the call settles DRAIN_MS after the process exits; and the program is looked up on PATH first, since through
 * a shell a missing program is only an exit 127, which a script can give too.
 *
 * A timeout or an abort kills the whole group (SIGTERM, then SIGKILL after the grace) and rejects with KrError
 * `EXEC_TIMEOUT` or `EXEC_ABORTED`. A process that exits on its own resolves with its code (128+n for signal n).
 */
export function runProcess(spec: ProcessSpec, deps: TransportDeps = {}): Promise<ExecResult> {
  const clock = deps.clock ?? realClock;
  const log = deps.log ?? silentLogger;
  const grace = deps.killGraceMs ?? 2000;
  const { signal, timeoutMs, node, transport } = spec;
  if (signal?.aborted) return Promise.reject(aborted(spec, signal));
  if (timeoutMs !== undefined && !(timeoutMs > 0))
    return Promise.reject(
      new KrError('EXEC_BAD_TIMEOUT', `a timeout must be more than 0ms (got ${quote(timeoutMs)})`, { exit: EXIT.invalid }),
    );
  const env = spec.env ? { ...process.env, ...spec.env } : process.env;
  if (!which.sync(spec.argv[0], { nothrow: true, path: env.PATH ?? '' }))
    return Promise.reject(spawnFailed(spec, `${quote(spec.argv[0])} is not installed or not on PATH`));

  return new Promise<ExecResult>((resolve, reject) => {
    const started = clock.now();
    const out = CappedChunks.keeping(deps.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    const err = CappedChunks.keeping(deps.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
    const killer = new AbortController();
    const p = $({
      shell: '/bin/sh',
      prefix: 'exec ',
      postfix: '',
      quote: shq,
      input: spec.stdin,
      nothrow: true,
      quiet: true,
      verbose: false,
      detached: true,
      preferLocal: false,
      timeout: 0, // ours, on the clock (above); 0 also overrides a ZX_TIMEOUT in the environment
      cwd: process.cwd(),
      env,
      signal: killer.signal,
      store: { stdout: out, stderr: err, stdall: CappedChunks.keeping(0) },
    })`${spec.argv}`;
    const child = p.child;
    let exit: { code: number | null; sig: NodeJS.Signals | null } | undefined;
    let stop: 'timeout' | 'abort' | undefined;
    let settled = false;
    const cancels: (() => void)[] = [];

    const killGroup = (sig: NodeJS.Signals) => {
      if (child?.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    const kill = (why: 'timeout' | 'abort') => {
      if (stop || exit) return;
      stop = why;
      killer.abort(); // zx sends SIGTERM to the group
      // not cancelled when the call settles: members of the group that ignore SIGTERM still go
      clock.setTimer(grace, () => killGroup('SIGKILL'));
    };
    const finish = (spawnError?: unknown) => {
      if (settled) return;
      settled = true;
      for (const c of cancels.splice(0)) c();
      signal?.removeEventListener('abort', onAbort);
      for (const s of [child?.stdout, child?.stderr]) if (s) detach(s);
      const ms = clock.now() - started;
      if (stop === 'timeout') {
        log.debug('exec timed out', { node, transport, timeoutMs, ms });
        return reject(
          new KrError(
            'EXEC_TIMEOUT',
            `the script on node ${quote(node)} (${transport}) did not finish within ${formatDuration(timeoutMs ?? 0)}; it was killed`,
          ),
        );
      }
      if (stop === 'abort' && signal) return reject(aborted(spec, signal));
      if (spawnError && !exit) return reject(spawnFailed(spec, messageOf(spawnError), spawnError));
      const code = exit?.code ?? 128 + (exit?.sig ? (constants.signals[exit.sig] ?? 0) : 0);
      log.debug('exec finished', { node, transport, code, ms, stdoutBytes: out.total, stderrBytes: err.total });
      resolve({ code, stdout: out.text(), stderr: err.text() });
    };
    const onAbort = () => kill('abort');

    void p.then((o) => finish(o.cause ?? undefined));
    // The process may exit without reading all of its stdin; that is its business, not an error.
    child?.stdin?.on('error', () => {});
    child?.once('exit', (code, sig) => {
      exit = { code, sig };
      cancels.push(clock.setTimer(DRAIN_MS, () => finish()));
    });
    if (timeoutMs !== undefined) cancels.push(clock.setTimer(timeoutMs, () => kill('timeout')));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function aborted(spec: ProcessSpec, signal: AbortSignal): KrError {
  return new KrError('EXEC_ABORTED', `the script on node ${quote(spec.node)} (${spec.transport}) was interrupted`, {
    exit: EXIT.interrupted,
    cause: signal.reason,
  });
}

function spawnFailed(spec: ProcessSpec, what: string, cause?: unknown): KrError {
  const errno = (cause as NodeJS.ErrnoException | undefined)?.code;
  return new KrError('EXEC_SPAWN_FAILED', `cannot run the ${spec.transport} transport for node ${quote(spec.node)}: ${what}`, {
    cause,
    transient: spawnTransient(errno),
  });
}

/**
 * Stops keeping output but goes on reading: a background process the script left behind may still hold the
 * pipe, and must neither block the caller nor die of SIGPIPE.
 */
function detach(stream: Readable): void {
  stream.removeAllListeners('data');
  stream.on('data', () => {});
  (stream as Readable & { unref?: () => void }).unref?.();
}

/**
 * The store zx pushes one stream's chunks into (it takes any array-like, so output stays bounded): keeps the
 * first `max` bytes and counts the rest.
 */
class CappedChunks extends Array<Buffer> {
  private max = 0;
  private kept = 0;
  total = 0;

  static keeping(max: number): CappedChunks {
    const c = new CappedChunks();
    c.max = max;
    return c;
  }

  override push(...chunks: Buffer[]): number {
    for (const b of chunks) {
      this.total += b.length;
      const room = this.max - this.kept;
      if (room <= 0) continue;
      const part = b.length > room ? b.subarray(0, room) : b;
      super.push(part);
      this.kept += part.length;
    }
    return this.length;
  }

  text(): string {
    const s = Buffer.concat(this).toString('utf8');
    return this.total > this.kept ? `${s}\n[kube-runbook: ${this.total - this.kept} more bytes of output dropped]\n` : s;
  }
}
