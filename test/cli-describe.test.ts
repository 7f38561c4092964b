import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { root, runCli } from './helpers/cli.js';
import { Terminal } from './helpers/terminal.js';

const cli = (...args: string[]) => runCli(args);

/** The ids docs/actions.md or docs/probes.md lists in its summary table, in its order. */
const documentedIds = (file: string) =>
  [...readFileSync(join(root, 'docs', file), 'utf8').matchAll(/^\| \[`([a-z0-9-]+)`\]/gm)].map((m) => m[1]);

beforeAll(() => {
  if (!existsSync(join(root, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

describe('kube-runbook actions and probes', () => {
  it('lists every action, one line each: id, kind, summary, sorted', async () => {
    const r = await cli('actions');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const lines = r.stdout.trimEnd().split('\n');
    const ids = lines.map((l) => l.split(/\s+/)[0]);
    expect(ids).toEqual(documentedIds('actions.md'));
    expect(ids).toEqual([...ids].sort());
    expect(lines.find((l) => l.startsWith('stop-kubelet '))).toMatch(/^stop-kubelet +remediation +Stop the kubelet on nodes/);
    expect(lines.find((l) => l.startsWith('stop-apiserver '))).toMatch(/^stop-apiserver +fault +Stop kube-apiserver/);
  });

  it('lists every probe, one line each: id, summary, sorted', async () => {
    const r = await cli('probes');
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    const ids = lines.map((l) => l.split(/\s+/)[0]);
    expect(ids).toEqual(documentedIds('probes.md'));
    expect(lines.find((l) => l.startsWith('node-leases '))).toMatch(/^node-leases +Each selected node's Lease age/);
  });

  it('prints both lists as JSON and as YAML, the same rows', { timeout: 60_000 }, async () => {
    const [aj, ay, pj, py] = await Promise.all([
      cli('actions', '--output', 'json'),
      cli('actions', '-o', 'yaml'),
      cli('probes', '-o', 'json'),
      cli('probes', '-o', 'yaml'),
    ]);
    const a = JSON.parse(aj.stdout) as { id: string; kind: string; targets: string }[];
    expect(a.map((x) => x.id)).toEqual(documentedIds('actions.md'));
    expect(a.find((x) => x.id === 'stop-etcd')).toMatchObject({ kind: 'fault', targets: 'nodes' });
    expect(parse(ay.stdout)).toEqual(a);
    const p = JSON.parse(pj.stdout) as { id: string; summary: string }[];
    expect(p.map((x) => x.id)).toEqual(documentedIds('probes.md'));
    expect(parse(py.stdout)).toEqual(p);
  });
});

describe('kube-runbook describe', () => {
  it('shows an action as docs/actions.md does: parameters with defaults, layouts, undo, permissions', async () => {
    const r = await cli('describe', 'stop-kubelet');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^# action stop-kubelet\n/);
    const section = readFileSync(join(root, 'docs/actions.md'), 'utf8').split('\n## stop-kubelet\n')[1]!.split('\n## ')[0]!;
    expect(r.stdout).toContain(section.trim());
    expect(r.stdout).toContain('| `timeout` | duration | default `"2m"` |');
    expect(r.stdout).toContain('### By layout');
    expect(r.stdout).toContain('### How it is undone');
    expect(r.stdout).toContain('_None: it works on nodes only._');
  });

  it('shows a probe with the API permissions it needs', async () => {
    const r = await cli('describe', 'node-leases');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^# probe node-leases\n/);
    expect(r.stdout).toContain('`staleAfter`');
    expect(r.stdout).toMatch(/\| `list, watch` \| `leases\.coordination\.k8s\.io` \|/);
  });

  it('prints one module as JSON: typed parameters, layouts, undo, access', async () => {
    const r = await cli('describe', 'stop-kubelet', '-o', 'json');
    expect(r.code).toBe(0);
    const d = JSON.parse(r.stdout) as {
      type: string;
      kind: string;
      params: { name: string; type: string; default?: unknown }[];
      layouts: Record<string, string>;
      undo: string;
      access: unknown[];
    };
    expect(d).toMatchObject({ id: 'stop-kubelet', type: 'action', kind: 'remediation', access: [] });
    expect(d.params).toContainEqual(expect.objectContaining({ name: 'nodes', default: 'workers' }));
    expect(d.params).toContainEqual(expect.objectContaining({ name: 'timeout', type: 'duration', default: '2m' }));
    expect(Object.keys(d.layouts)).toEqual(expect.arrayContaining(['kubeadm', 'k3s']));
    expect(d.undo).toMatch(/start/);
    const p = JSON.parse((await cli('describe', 'node-leases', '--output', 'json')).stdout) as {
      type: string;
      access: { verbs: string[]; resource: string }[];
    };
    expect(p.type).toBe('probe');
    expect(p.access).toContainEqual(expect.objectContaining({ resource: 'leases' }));
  });

  it('on a terminal, is plain text wrapped to its width: no Markdown', { timeout: 60_000 }, async () => {
    const t = new Terminal(`stty cols 60; exec ${process.execPath} bin/kube-runbook.js describe stop-kubelet`, { cwd: root, env: {} });
    const screen = await t.type('', /nodes only\s*$/);
    expect(await t.end()).toBe(0);
    const lines = screen.trimEnd().split(/\r?\n/);
    expect(lines[0]).toBe('action stop-kubelet: remediation, targets nodes');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(60);
    expect(screen).not.toMatch(/`|\*\*|^\s*\||^#+ /m);
    expect(screen).toMatch(/^ {2}timeout +duration, default "2m"\r?$/m);
    expect(screen).toContain('\nExample\r\n  # with:\r\n    # nodes: workers\r\n    # timeout: 2m\r\n');
    expect(screen).toContain('systemctl stop kubelet');
  });

  it('prints the Markdown of the docs with -o markdown, and one module as YAML', { timeout: 60_000 }, async () => {
    const [md, yaml, json] = await Promise.all([
      cli('describe', 'stop-kubelet', '-o', 'markdown'),
      cli('describe', 'starve-cpu', '-o', 'yaml'),
      cli('describe', 'starve-cpu', '-o', 'json'),
    ]);
    expect(md.stdout).toBe((await cli('describe', 'stop-kubelet')).stdout);
    expect(md.stdout).toContain('### Example\n\n```yaml\n# with:\n  # nodes: workers\n  # timeout: 2m\n```');
    expect(parse(yaml.stdout)).toEqual(JSON.parse(json.stdout));
    expect(parse(yaml.stdout)).toMatchObject({
      id: 'starve-cpu',
      example: expect.stringMatching(/^with:\n {2}# nodes: control-plane\n {2}component: apiserver\n {2}quota: 10%/),
    });
  });

  it('suggests the id meant on a typo and exits 2', async () => {
    const r = await cli('describe', 'stop-kubelt');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('no action or probe is called "stop-kubelt": did you mean "stop-kubelet"? [UNKNOWN_MODULE]');
    expect(r.stderr).not.toContain('    at ');
  });

  it('says where to look when nothing is close, exit 2', async () => {
    const r = await cli('describe', 'reboot-everything', '-o', 'json');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no action or probe is called "reboot-everything" [UNKNOWN_MODULE]');
    expect(r.stderr).toContain('kube-runbook actions');
  });
});
