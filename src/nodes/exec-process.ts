import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable } from 'node:stream';
import { realClock, type Clock } from '../core/clock.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
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

export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

export interface ProcessSpec {
  /** Program and arguments, run without a shell. */
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

/**
 * Runs a program in a process group of its own, feeds it `stdin`, keeps bounded stdout and stderr.
 * A timeout or an abort kills the whole group (SIGTERM, then SIGKILL after the grace) and rejects with
 * KrError `EXEC_TIMEOUT` or `EXEC_ABORTED`. A process that exits on its own resolves with its code (128+n for signal n).
 */
export function runProcess(spec: ProcessSpec, deps: TransportDeps = {}): Promise<ExecResult> {
  const clock = deps.clock ?? realClock;
  const log = deps.log ?? silentLogger;
  const cap = deps.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const grace = deps.killGraceMs ?? 2000;
  const { signal, timeoutMs, node, transport } = spec;
  if (signal?.aborted) return Promise.reject(aborted(spec, signal));
  if (timeoutMs !== undefined && !(timeoutMs > 0))
    return Promise.reject(new KrError('EXEC_BAD_TIMEOUT', `a timeout must be more than 0ms (got ${quote(timeoutMs)})`, { exit: EXIT.invalid }));

  return new Promise<ExecResult>((resolve, reject) => {
    const started = clock.now();
    const child = spawn(spec.argv[0], spec.argv.slice(1), {
      stdio: ['pipe', 'pipe', 'pipe'],
      // a session of its own: the whole tree can be killed as a group, and nothing can prompt on a terminal
      detached: true,
      env: spec.env ? { ...process.env, ...spec.env } : process.env,
    });
    const out = new Capped(cap);
    const err = new Capped(cap);
    let exit: { code: number | null; sig: NodeJS.Signals | null } | undefined;
    let open = 2;
    let stop: 'timeout' | 'abort' | undefined;
    let settled = false;
    const cancels: (() => void)[] = [];

    const killGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    const kill = (why: 'timeout' | 'abort') => {
      if (stop || exit) return;
      stop = why;
      killGroup('SIGTERM');
      // not cancelled when the call settles: members of the group that ignore SIGTERM still go
      clock.setTimer(grace, () => (!exit || open > 0) && killGroup('SIGKILL'));
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      for (const c of cancels.splice(0)) c();
      signal?.removeEventListener('abort', onAbort);
      for (const s of [child.stdout, child.stderr]) detach(s);
      const ms = clock.now() - started;
      if (stop === 'timeout') {
        log.debug('exec timed out', { node, transport, timeoutMs, ms });
        return reject(
          new KrError('EXEC_TIMEOUT', `the script on node ${quote(node)} (${transport}) did not finish within ${formatDuration(timeoutMs ?? 0)}; it was killed`),
        );
      }
      if (stop === 'abort' && signal) return reject(aborted(spec, signal));
      const code = exit?.code ?? 128 + (exit?.sig ? (constants.signals[exit.sig] ?? 0) : 0);
      log.debug('exec finished', { node, transport, code, ms, stdoutBytes: out.total, stderrBytes: err.total });
      resolve({ code, stdout: out.text(), stderr: err.text() });
    };
    const onAbort = () => kill('abort');

    child.on('error', (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      for (const c of cancels.splice(0)) c();
      signal?.removeEventListener('abort', onAbort);
      const what = e.code === 'ENOENT' ? `${quote(spec.argv[0])} is not installed or not on PATH` : messageOf(e);
      reject(new KrError('EXEC_SPAWN_FAILED', `cannot run the ${transport} transport for node ${quote(node)}: ${what}`, { cause: e }));
    });
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    for (const s of [child.stdout, child.stderr])
      s.on('close', () => {
        open -= 1;
        if (open === 0 && exit) finish();
      });
    child.on('exit', (code, sig) => {
      exit = { code, sig };
      if (open === 0) finish();
      else cancels.push(clock.setTimer(DRAIN_MS, finish));
    });
    // The process may exit without reading all of its stdin; that is its business, not an error.
    child.stdin.on('error', () => {});
    child.stdin.end(spec.stdin);

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

/**
 * Stops keeping output but goes on reading: a background process the script left behind may still hold the
 * pipe, and must neither block the caller nor die of SIGPIPE.
 */
function detach(stream: Readable): void {
  stream.removeAllListeners('data');
  stream.on('data', () => {});
  (stream as Readable & { unref?: () => void }).unref?.();
}

/** Keeps the first `max` bytes of a stream and counts the rest. */
class Capped {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  total = 0;

  constructor(private readonly max: number) {}

  push(b: Buffer): void {
    this.total += b.length;
    const room = this.max - this.kept;
    if (room <= 0) return;
    const part = b.length > room ? b.subarray(0, room) : b;
    this.chunks.push(part);
    this.kept += part.length;
  }

  text(): string {
    const s = Buffer.concat(this.chunks).toString('utf8');
    return this.total > this.kept ? `${s}\n[kube-runbook: ${this.total - this.kept} more bytes of output dropped]\n` : s;
  }
}
