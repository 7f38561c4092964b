import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { beforeAll, describe, expect, it, vi } from 'vitest';
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

  it('refuses run_runbook when the halt cannot be read (an apiserver that does not answer), with its code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-mcp-halt-'));
    try {
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]',
          'users: [{name: u, user: {token: not-a-token}}]',
          'contexts: [{name: lab, context: {cluster: c, user: u}}]',
          'current-context: lab',
        ].join('\n'),
      );
      const r = await inspect(
        ['--runbooks', 'runbooks/', '--allow-runs', '--context', 'lab', '--kubeconfig', kubeconfig],
        ['tools/call', '--tool-name', 'run_runbook', '--tool-arg', 'runbook=kubelet-partition'],
      );
      const answer = JSON.parse(r.stdout) as { isError?: boolean; content: { text: string }[] };
      expect(answer.isError).toBe(true);
      expect(answer.content[0]!.text).toMatch(
        /^refused: cannot read the halt \(Lease kube-system\/kube-runbook-halt\): .*ECONNREFUSED.*; no run starts until it can be read \[HALT_UNREADABLE\]$/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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

  it('logs each call with its decision on stderr and in --log FILE, never on stdout (the protocol)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-mcp-cli-'));
    try {
      const file = join(dir, 'calls.jsonl');
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [join(root, 'bin', 'kube-runbook.js'), 'mcp', '--runbooks', 'runbooks/', '--log', file],
        cwd: root,
        env: { ...(process.env as Record<string, string>), KUBE_RUNBOOK_DEBUG: '' },
        stderr: 'pipe',
      });
      let stderr = '';
      transport.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
      const client = new Client({ name: 'cli-test', version: '2' });
      const notProtocol: Error[] = []; // a line on stdout that is not JSON-RPC would land here
      client.onerror = (e) => notProtocol.push(e);
      await client.connect(transport);
      await client.callTool({ name: 'describe_module', arguments: { id: 'nope', token: 'hunter2-the-token' } });
      await client.callTool({ name: 'run_runbook', arguments: { runbook: 'kubelet-partition' } });
      await vi.waitFor(() => expect(stderr.match(/\n/g)).toHaveLength(2));
      await client.close();
      expect(notProtocol).toEqual([]);
      const lines = stderr.trimEnd().split('\n');
      expect(lines).toEqual([
        expect.stringMatching(
          /^\S+Z mcp tool describe_module \{"id":"nope","token":"\[redacted\]"\} via cli-test 2: refused \[UNKNOWN_MODULE\]: no action or probe is called "nope" \(see list_modules\) \(\d+ ms\)$/,
        ),
        expect.stringMatching(
          /^\S+Z mcp tool run_runbook \{"runbook":"kubelet-partition"\} via cli-test 2: refused \[INVALID_PARAMS\]: .*Tool run_runbook not found/,
        ),
      ]);
      const logged = readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(logged.map((l) => [l.name, l.decision, l.code])).toEqual([
        ['describe_module', 'refused', 'UNKNOWN_MODULE'],
        ['run_runbook', 'refused', 'INVALID_PARAMS'],
      ]);
      expect(JSON.stringify(logged)).not.toContain('hunter2');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names a --log file it cannot open and a bad --otel-endpoint, exit 2, before serving', async () => {
    const log = await runCli(['mcp', '--log', '/nonexistent/dir/calls.jsonl']);
    expect(log.code).toBe(2);
    expect(log.stderr).toContain('--log "/nonexistent/dir/calls.jsonl": cannot open it for appending');
    const otel = await runCli(['mcp', '--otel-endpoint', 'collector:4318']);
    expect(otel.code).toBe(2);
    expect(otel.stderr).toContain('--otel-endpoint "collector:4318": OTLP/HTTP needs an http:// or https:// URL');
  });

  it('refuses --allow-runs without a context named, exit 2', async () => {
    const r = await runCli(['mcp', '--allow-runs']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--allow-runs needs --context NAME');
  });
});
