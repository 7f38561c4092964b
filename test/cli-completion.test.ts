import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { root, runCli } from './helpers/cli.js';
import { Terminal } from './helpers/terminal.js';

/** The actions whose ids start with `st`, in order. */
const ST_ACTIONS = [
  'starve-cpu',
  'stop-apiserver',
  'stop-controller-manager',
  'stop-etcd',
  'stop-kubelet',
  'stop-load-balancer',
  'stop-scheduler',
];

const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-completion-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const kubeconfig = join(tmp, 'kubeconfig');
writeFileSync(
  kubeconfig,
  `apiVersion: v1
kind: Config
current-context: lab
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts:
  - {name: lab, context: {cluster: c}}
  - {name: "arn:aws:eks:eu-west-1:123456789012:cluster/prod", context: {cluster: c}}
  - {name: staging-admin@staging, context: {cluster: c}}
`,
);

/** The candidates `__complete` prints for WORDS (the last one being typed), and what the shell adds (`:THEN`). */
async function complete(words: string[], env: Record<string, string> = {}): Promise<{ values: string[]; then: string }> {
  const r = await runCli(['__complete', '--', ...words], { KUBECONFIG: '', ...env });
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stdout.trimEnd().split('\n');
  return { values: lines.slice(0, -1).map((l) => l.split('\t')[0]!), then: lines.at(-1)! };
}

describe('kube-runbook __complete (what the completion scripts ask at each TAB)', () => {
  it('offers subcommands, then the actions after `describe st`', async () => {
    const top = await complete(['']);
    expect(top.values).toEqual(expect.arrayContaining(['plan', 'run', 'validate', 'describe', 'completion']));
    expect(top.values).not.toContain('__complete');
    const stop = await complete(['describe', 'st']);
    expect(stop.values).toEqual(ST_ACTIONS);
    expect((await complete(['describe', 'node-'])).values).toEqual(['node-leases', 'node-ready']);
  });

  it("offers a command's options and their choices", async () => {
    expect((await complete(['plan', '--o'])).values).toEqual(['--offline', '--output']);
    expect((await complete(['plan', 'rb.yaml', '-o', ''])).values).toEqual(['text', 'json', 'yaml']);
    expect((await complete(['completion', ''])).values).toEqual(['bash', 'zsh', 'fish']);
    expect((await complete(['agent', 'ma'])).values).toEqual(['manifests']);
  });

  it('leaves runbooks, inventories and directories to the shell, saying which', async () => {
    expect((await complete(['plan', ''])).then).toBe(':yaml');
    expect((await complete(['validate', 'a.yaml', ''])).then).toBe(':yaml');
    expect((await complete(['run', 'rb.yaml', '-i', ''])).then).toBe(':yaml');
    expect((await complete(['run', 'rb.yaml', '--kubeconfig', ''])).then).toBe(':file');
    expect((await complete(['run', 'rb.yaml', '--report-dir', ''])).then).toBe(':dir');
    expect(await complete(['describe', ''])).toMatchObject({ then: ':words' });
  });

  it('offers the contexts of KUBECONFIG, or of the kubeconfig named on the line', async () => {
    const all = await complete(['plan', 'rb.yaml', '--context', ''], { KUBECONFIG: kubeconfig });
    expect(all.values).toEqual(['arn:aws:eks:eu-west-1:123456789012:cluster/prod', 'lab', 'staging-admin@staging']);
    expect((await complete(['run', 'rb.yaml', '--kubeconfig', kubeconfig, '--context', 'st'])).values).toEqual(['staging-admin@staging']);
    expect((await complete(['plan', 'rb.yaml', '--context', ''], { KUBECONFIG: join(tmp, 'missing') })).values).toEqual([]);
  });
});

/**
 * `kubectl runbook <TAB>`: kubectl (1.26+) runs `kubectl_complete-runbook __complete WORDS...` from PATH and reads
 * Cobra's protocol: candidates (TAB, description), then `:DIRECTIVE` (4 no files, 8 files of the listed extensions,
 * 16 directories, 0 any file).
 */
describe('kubectl_complete-runbook (kubectl plugin completion)', () => {
  const ask = async (...words: string[]) => {
    const r = await promisify(execFile)(process.execPath, ['bin/kubectl_complete-runbook.js', '__complete', ...words], {
      cwd: root,
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
    return r.stdout.trim().split('\n');
  };

  it("answers in Cobra's protocol: ids with what they are, options, contexts, and runbook files by extension", async () => {
    expect(await ask('describe', 'st')).toEqual([...ST_ACTIONS.map((id) => `${id}\taction`), ':4']);
    // kubectl passes options as they are typed, without `--`
    expect((await ask('plan', '--o')).map((l) => l.split('\t')[0])).toEqual(['--offline', '--output', ':4']);
    expect(await ask('plan', 'rb.yaml', '--context', 'st')).toEqual(['staging-admin@staging\tkubeconfig context', ':4']);
    expect(await ask('plan', '')).toEqual(['yaml', 'yml', ':8']);
  });

  it('is installed beside kubectl-runbook', () => {
    const bin = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin;
    expect(bin['kubectl_complete-runbook']).toBe('bin/kubectl_complete-runbook.js');
    expect(bin['kubectl-runbook']).toBe(bin['kube-runbook']);
  });
});

describe('kube-runbook completion', () => {
  it('prints a script for bash, zsh and fish, and refuses another shell (exit 2)', async () => {
    for (const shell of ['bash', 'zsh', 'fish']) {
      const r = await runCli(['completion', shell]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('__complete --');
      expect(r.stdout).toContain(shell === 'fish' ? 'complete -c kube-runbook' : 'kube-runbook kubectl-runbook');
    }
    const bad = await runCli(['completion', 'tcsh']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      "kube-runbook: command-argument value 'tcsh' is invalid for argument 'shell'. Allowed choices are bash, zsh, fish.\nRun 'kube-runbook completion --help' for usage.\n",
    );
  });

  it('gives bash a script it parses', async () => {
    const file = join(tmp, 'completion.bash');
    writeFileSync(file, (await runCli(['completion', 'bash'])).stdout);
    expect(() => execFileSync('bash', ['-n', file])).not.toThrow();
  });
});

/** `kube-runbook` on PATH, running the built CLI, as an installed one would. */
function installed(): string {
  const bin = join(tmp, 'bin');
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'kube-runbook'), `#!/bin/sh\nexec '${process.execPath}' '${join(root, 'bin/kube-runbook.js')}' "$@"\n`);
  chmodSync(join(bin, 'kube-runbook'), 0o755);
  return `${bin}:${process.env.PATH}`;
}

describe('bash completion on a terminal', () => {
  it('completes `kube-runbook describe sto<TAB><TAB>` with the stop-* actions, runbook files and contexts', async () => {
    const t = new Terminal('bash --norc --noprofile -i', { cwd: root, env: { KUBECONFIG: kubeconfig, PATH: installed() } });
    try {
      await t.type(
        'PS1="ready\\$ "; bind "set bell-style none"; source <(kube-runbook completion bash); echo sourced\n',
        /sourced\r?\nready\$ $/,
      );
      // sto<TAB> writes the prefix the stop-* actions share, <TAB><TAB> lists them
      await t.type('kube-runbook describe sto\t', /describe stop-$/);
      const listed = await t.type('\t\t', /stop-scheduler[\s\S]*ready\$ kube-runbook describe stop-$/);
      for (const id of ['stop-apiserver', 'stop-controller-manager', 'stop-etcd', 'stop-kubelet', 'stop-load-balancer'])
        expect(listed).toContain(id);
      expect(listed).not.toContain('run-command');
      expect(listed).not.toContain('starve-cpu');
      // one match is written out in full; runbook files and contexts (with colons) too
      await t.type('k\t', /describe stop-kubelet $/);
      await t.type('\x15kube-runbook plan runbooks/apiserver-ou\t', /plan runbooks\/apiserver-outage\.yaml $/);
      await t.type('--context arn\t', /--context arn:aws:eks:eu-west-1:123456789012:cluster\/prod $/);
    } finally {
      await t.end('\x15exit\n');
    }
  }, 60_000);
});
