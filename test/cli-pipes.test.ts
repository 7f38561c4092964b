import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** Runs the BUILT cli (`npm run build` first) as a user would: in a shell pipeline, or from a checkout never built. */
const root = fileURLToPath(new URL('..', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-pipes-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function sh(script: string, cwd = root): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-c', `set -o pipefail; ${script}`],
      { cwd, env: { ...process.env, NODE: process.execPath, KUBE_RUNBOOK_DEBUG: '' } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('the CLI in a pipeline', () => {
  it('ends quietly, exit 0, when the reader goes away (schema | head -1)', async () => {
    const r = await sh('"$NODE" bin/kube-runbook.js schema runbook | head -1');
    expect(r.stdout).toBe('{\n');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('a command that fails still says why on stderr and keeps its exit code after stdout is closed', async () => {
    const r = await sh('"$NODE" bin/kube-runbook.js describe stop-kubelt | head -1');
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('did you mean "stop-kubelet"?');
    expect(r.code).toBe(2);
  });
});

describe('a checkout that was never built', () => {
  it('says in one line to run the build, exit 2', async () => {
    mkdirSync(join(tmp, 'checkout/bin'), { recursive: true });
    for (const f of ['kube-runbook.js', 'start.js']) copyFileSync(join(root, 'bin', f), join(tmp, 'checkout/bin', f));
    const r = await sh('"$NODE" bin/kube-runbook.js actions', join(tmp, 'checkout'));
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`kube-runbook: ${join(tmp, 'checkout')}/ is not built: run \`npm ci && npm run build\` there\n`);
  });
});
