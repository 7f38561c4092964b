import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * A node script run for real by /bin/sh, with `bin` first on its PATH (stub curl, kubectl, …): what it says so far,
 * and its exit.
 */
export function runNodeScript(script: string, bin: string): { out: () => string; exit: Promise<number | null> } {
  const out: string[] = [];
  const child = spawn('/bin/sh', ['-c', script], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
  child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
  return { out: () => out.join(''), exit: new Promise<number | null>((r) => child.on('exit', r)) };
}

/**
 * A scratch node for a node script run for real, removed after the tests: `svc` (the component's directory, at
 * `svcPath` below `dir`) and `bin` (for stub commands) made.
 */
export function scratchNode(prefix: string, ...svcPath: string[]): { dir: string; svc: string; bin: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const svc = join(dir, ...svcPath);
  const bin = join(dir, 'bin');
  mkdirSync(svc, { recursive: true });
  mkdirSync(bin);
  return { dir, svc, bin };
}

/** Writes FILE: the kubeconfig of a component on a node, one cluster at SERVER and a user with a bearer token. */
export function writeNodeKubeconfig(file: string, server: string, user: string, token: string): void {
  writeFileSync(
    file,
    `apiVersion: v1\nclusters:\n- cluster:\n    server: ${server}\n  name: lab\nusers:\n- name: ${user}\n  user:\n    token: "${token}"\n`,
  );
}
