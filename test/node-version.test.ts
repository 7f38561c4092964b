import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
/** The system's Node, older than the CLI needs (the machines the CLI is checked on have Node 20 there). */
const OLD_NODE = '/usr/bin/node';

function run(node: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(node, args, { cwd: root }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('bin/kube-runbook.js on an older Node', () => {
  it('checks the same minimum package.json declares', () => {
    const engines = (JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { engines: { node: string } }).engines.node;
    const start = readFileSync(`${root}/bin/start.js`, 'utf8');
    expect(engines).toBe(`>=${/const MIN_NODE = '([\d.]+)'/.exec(start)?.[1]}`);
  });

  it('says in one line which Node it needs and exits 2, before loading anything', async () => {
    const version = await run(OLD_NODE, ['-p', 'process.versions.node']);
    expect(version.code, `${OLD_NODE} must exist to run this test`).toBe(0);
    const [major] = version.stdout.trim().split('.').map(Number);
    expect(major, `${OLD_NODE} must be older than Node 22 for this test (it is ${version.stdout.trim()})`).toBeLessThan(22);
    const r = await run(OLD_NODE, ['bin/kube-runbook.js', '--help']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `kube-runbook needs Node.js 22.19 or newer; this is ${version.stdout.trim()}. ` +
        'Upgrade Node.js (https://nodejs.org, or your package manager), or use the single executable, which brings its own (npm run package)\n',
    );
  });

  it('runs on the Node it needs', async () => {
    const r = await run(process.execPath, ['bin/kube-runbook.js', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: kube-runbook');
  });
});
