import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository root: the BUILT cli (`npm run build` first) runs from there, as a user would. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `bin/kube-runbook.js ARGS` with this Node, the environment given on top of this process's. */
export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/kube-runbook.js', ...args],
      { cwd: root, env: { ...process.env, KUBE_RUNBOOK_DEBUG: '', ...env } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * Writes FILE: a kubeconfig of one cluster at SERVER, a user with a token that is not real, and these contexts of
 * them, the first one current.
 */
export function writeKubeconfig(file: string, server: string, contexts: readonly string[]): string {
  const named = contexts.map((name) => `{name: ${name}, context: {cluster: c, user: u}}`).join(', ');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}"}}]
users: [{name: u, user: {token: not-a-real-token-abcdef}}]
contexts: [${named}]
current-context: ${contexts[0]}
`,
  );
  return file;
}
