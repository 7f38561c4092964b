import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { root, runCli } from './helpers/cli.js';

/** The MCP Inspector's CLI (a devDependency), run by this Node against the BUILT binary over stdio, as a client would. */
const INSPECTOR = join(root, 'node_modules', '@modelcontextprotocol', 'inspector', 'cli', 'build', 'cli.js');

function inspect(serverArgs: string[], method: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [INSPECTOR, '--cli', process.execPath, join(root, 'bin', 'kube-runbook.js'), 'mcp', ...serverArgs, '--method', ...method],
      { cwd: root, timeout: 60_000, env: { ...process.env, KUBE_RUNBOOK_DEBUG: '' } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

const toolNames = (stdout: string) => (JSON.parse(stdout) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();

beforeAll(() => {
  if (!existsSync(join(root, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

describe('kube-runbook mcp, through the MCP Inspector CLI over stdio', { timeout: 60_000 }, () => {
  it('lists only read-only tools by default, and run and recover with --allow-runs --context', async () => {
    const [plain, allowed] = await Promise.all([
      inspect(['--runbooks', 'runbooks/'], ['tools/list']),
      inspect(['--runbooks', 'runbooks/', '--allow-runs', '--context', 'lab'], ['tools/list']),
    ]);
    expect(plain.code, plain.stderr).toBe(0);
    const readOnly = toolNames(plain.stdout);
    expect(readOnly).toEqual(expect.arrayContaining(['eviction_forecast', 'plan_runbook', 'validate_runbook', 'read_report']));
    expect(readOnly).not.toContain('run_runbook');
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(toolNames(allowed.stdout)).toEqual([...readOnly, 'recover_run', 'resume_runs', 'run_runbook'].sort());
  });

  it('validates a shipped runbook by name with the code `validate` uses', async () => {
    const r = await inspect(
      ['--runbooks', 'runbooks/'],
      ['tools/call', '--tool-name', 'validate_runbook', '--tool-arg', 'runbook=kubelet-partition'],
    );
    expect(r.code, r.stderr).toBe(0);
    const text = (JSON.parse(r.stdout) as { content: { text: string }[] }).content[0]!.text;
    expect(text).toMatch(/^ok .*runbooks\/kubelet-partition\.yaml \(Runbook kubelet-partition, \d+ steps/);
  });

  it('refuses --allow-runs without a context named, exit 2', async () => {
    const r = await runCli(['mcp', '--allow-runs']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--allow-runs needs --context NAME');
  });
});
