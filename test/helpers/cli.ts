import { execFile } from 'node:child_process';
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
    execFile(process.execPath, ['bin/kube-runbook.js', ...args], { cwd: root, env: { ...process.env, KUBE_RUNBOOK_DEBUG: '', ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}
