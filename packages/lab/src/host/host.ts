import { spawn } from 'node:child_process';
import { KrError } from 'kube-runbook/internal/core/errors.js';

/** Commands on this machine, as an argument vector (no shell) or a POSIX sh script sent on stdin. */
export interface RunOptions {
  input?: string;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  signal?: AbortSignal;
  /** Called with each line of stdout and stderr as it comes (long builds). */
  onLine?: (line: string) => void;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(cmd: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      signal: options.signal,
      timeout: options.timeoutMs,
      killSignal: 'SIGKILL',
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const lines = lineSplitter(options.onLine);
    child.stdout.on('data', (b: Buffer) => (out.push(b), lines(b)));
    child.stderr.on('data', (b: Buffer) => (err.push(b), lines(b)));
    child.on('error', (e) => {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') resolvePromise({ code: 127, stdout: '', stderr: `${cmd}: not found` });
      else reject(e);
    });
    child.on('close', (code, signal) => {
      resolvePromise({
        code: code ?? (signal ? 128 + (signal === 'SIGKILL' ? 9 : 15) : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
  });
}

/** Runs a POSIX sh script (sent on stdin). */
export function sh(script: string, options: Omit<RunOptions, 'input'> = {}): Promise<RunResult> {
  return run('/bin/sh', ['-s'], { ...options, input: script });
}

/** Like `run`, but a non-zero exit is a KrError with `code` and the command's own words. */
export async function must(code: string, cmd: string, args: string[], options: RunOptions = {}): Promise<string> {
  const r = await run(cmd, args, options);
  if (r.code !== 0) {
    const said = (r.stderr || r.stdout).trim().split('\n').slice(-5).join('\n');
    throw new KrError(code, `${cmd} ${args.join(' ')} failed (exit ${r.code}): ${said}`);
  }
  return r.stdout;
}

export async function mustSh(code: string, what: string, script: string, options: Omit<RunOptions, 'input'> = {}): Promise<string> {
  const r = await sh(script, options);
  if (r.code !== 0) {
    const said = (r.stderr || r.stdout).trim().split('\n').slice(-8).join('\n');
    throw new KrError(code, `${what} failed (exit ${r.code}): ${said}`);
  }
  return r.stdout;
}

function lineSplitter(onLine?: (line: string) => void): (b: Buffer) => void {
  if (!onLine) return () => {};
  let rest = '';
  return (b) => {
    const parts = (rest + b.toString('utf8')).split('\n');
    rest = parts.pop() ?? '';
    for (const p of parts) onLine(p);
  };
}

/** Whether a command is on PATH. */
export async function have(cmd: string): Promise<boolean> {
  return (await run('/bin/sh', ['-c', 'command -v "$1" >/dev/null 2>&1', 'sh', cmd])).code === 0;
}
