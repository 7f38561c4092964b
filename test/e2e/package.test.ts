/**
 * The ways kube-runbook installs: the npm tarball installed globally and run on Node 24, and the single executable
 * (Node SEA, `npm run package`) run with no `node` on PATH. No lab needed; builds take a minute or two each.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { ensureAptPackages } from '../../src/lab/install/install.js';
import { Terminal } from '../helpers/terminal.js';
import { REPO } from './helpers/lab.js';

const EXE = join(REPO, 'build', 'kube-runbook-linux-x64');
const NODE24 = join(REPO, 'node_modules', 'node', 'bin', 'node');
let work: string;

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: o.cwd ?? work, env: o.env ?? process.env, maxBuffer: 64 * 1024 * 1024, timeout: 600_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** PATH without any directory that has a `node`. */
const pathWithoutNode = () =>
  (process.env.PATH ?? '')
    .split(':')
    .filter((d) => d && !existsSync(join(d, 'node')))
    .join(':');

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'kr-pkg-'));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('install anywhere', () => {
  it('npm pack gives a tarball that npm install -g installs and that runs on Node 24', async () => {
    const pack = await run('npm', ['pack', '--pack-destination', work], { cwd: REPO });
    expect(pack.code, pack.stderr).toBe(0);
    const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'))!;
    expect(tgz).toMatch(/^kube-runbook-\d+\.\d+\.\d+\.tgz$/);
    const prefix = join(work, 'prefix');
    // npm and the installed CLI on Node 24, as on a machine where that is the Node
    const env = { ...process.env, PATH: `${dirname(NODE24)}:${process.env.PATH}` };
    const install = await run('npm', ['install', '-g', '--prefix', prefix, '--ignore-scripts', join(work, tgz)], { env });
    expect(install.code, install.stderr).toBe(0);
    const bin = join(prefix, 'bin', 'kube-runbook');
    const help = await run(bin, ['--help'], { env });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: kube-runbook');
    const validate = await run(bin, ['validate', join(prefix, 'lib', 'node_modules', 'kube-runbook', 'runbooks', 'kubelet-partition.yaml')], { env });
    expect(validate.code, validate.stderr).toBe(0);
    expect(validate.stdout).toContain('ok ');
    const kubectl = await run(join(prefix, 'bin', 'kubectl-runbook'), ['--help'], { env });
    expect(kubectl.stdout).toContain('Usage: kubectl runbook');
    // what kubectl runs for `kubectl runbook describe stop-k<TAB>`
    const completes = await run(join(prefix, 'bin', 'kubectl_complete-runbook'), ['__complete', 'describe', 'stop-k'], { env });
    expect(completes.stdout.trim().split('\n'), completes.stderr).toEqual(['stop-kubelet\taction', ':4']);
  }, 600_000);

  describe('the single executable', () => {
    beforeAll(async () => {
      const r = await run('npm', ['run', 'package'], { cwd: REPO });
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
    }, 900_000);

    it('runs validate and plan where no node is on PATH', async () => {
      const env = { PATH: pathWithoutNode(), HOME: work };
      expect((await run('/bin/sh', ['-c', 'command -v node || echo none'], { env })).stdout.trim()).toBe('none');
      const version = await run(EXE, ['--version'], { env });
      expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
      const validate = await run(EXE, ['validate', join(REPO, 'runbooks', 'kubelet-partition.yaml')], { env });
      expect(validate.code, validate.stderr).toBe(0);
      expect(validate.stdout).toContain('(Runbook kubelet-partition, 5 steps, 2 guards)');
      const plan = await run(EXE, ['plan', join(REPO, 'runbooks', 'kubelet-partition.yaml'), '-i', join(REPO, 'examples', 'inventory-lab.yaml'), '--offline'], { env });
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain('revert step 2: block-kubelet-egress on node-1');
      const bad = await run(EXE, ['validate', join(REPO, 'test', 'fixtures', 'invalid', readdirSync(join(REPO, 'test', 'fixtures', 'invalid'))[0]!)], { env });
      expect(bad.code).toBe(2);
      expect(bad.stderr + bad.stdout).not.toContain('    at ');
    });

    it('comes with a krew manifest whose sha256 is the archive’s, which holds the executable as kube-runbook', async () => {
      const manifest = parse(readFileSync(join(REPO, 'build', 'krew', 'runbook.yaml'), 'utf8')) as {
        kind: string;
        metadata: { name: string };
        spec: { platforms: { sha256: string; bin: string; uri: string; selector: { matchLabels: Record<string, string> } }[] };
      };
      expect(manifest.kind).toBe('Plugin');
      expect(manifest.metadata.name).toBe('runbook');
      const [linux] = manifest.spec.platforms;
      expect(linux!.selector.matchLabels).toEqual({ os: 'linux', arch: 'amd64' });
      expect(linux!.sha256).toBe(createHash('sha256').update(readFileSync(`${EXE}.tar.gz`)).digest('hex'));
      expect(linux!.uri).toMatch(/\/kube-runbook-linux-x64\.tar\.gz$/);
      const listed = await run('tar', ['-tzf', `${EXE}.tar.gz`]);
      expect(listed.stdout.trim()).toBe(linux!.bin);
    });
  });
});

/**
 * `kube-runbook completion zsh|fish` in the real shells, from Debian's packages (bash's is a unit test, bash being
 * everywhere): the same question as there, `kube-runbook describe st<TAB>`, answered with the stop-* actions.
 */
describe('shell completion in zsh and fish', () => {
  let path: string;

  beforeAll(async () => {
    await ensureAptPackages(['zsh', 'fish'], { log: createLogger((_l, msg) => process.stderr.write(`[shells] ${msg}\n`)) });
    // kube-runbook on PATH as an installed one is: the built CLI on Node 24
    const bin = join(work, 'shell-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'kube-runbook'), `#!/bin/sh\nexec '${NODE24}' '${join(REPO, 'bin', 'kube-runbook.js')}' "$@"\n`);
    chmodSync(join(bin, 'kube-runbook'), 0o755);
    path = `${bin}:${process.env.PATH}`;
  });

  it('zsh (after compinit): st<TAB> writes the prefix the stop-* actions share, <TAB> lists them', async () => {
    // zle is off on a dumb terminal; under xterm it writes control sequences after the prompt, which Terminal leaves out
    const t = new Terminal('zsh -f -i', { cwd: REPO, env: { PATH: path, TERM: 'xterm', HOME: work } });
    try {
      await t.type("autoload -U compinit; compinit -u; source <(kube-runbook completion zsh); PS1='ready$ '; echo sourced\n", /sourced\r?\n[\s\S]*ready\$ $/);
      await t.type('kube-runbook describe st\t', /describe stop-$/);
      const listed = await t.type('\t', /stop-scheduler[\s\S]*describe stop-$/);
      for (const id of ['stop-apiserver', 'stop-controller-manager', 'stop-etcd', 'stop-kubelet', 'stop-load-balancer']) expect(listed).toContain(id);
      expect(listed).not.toContain('run-command');
    } finally {
      await t.end('\x15exit\n');
    }
  }, 60_000);

  it("fish: completes describe's ids with what they are, and runbook files", async () => {
    const r = await run('fish', ['--no-config', '-c', "kube-runbook completion fish | source; complete -C 'kube-runbook describe st'; complete -C 'kube-runbook plan runbooks/apiserver-ou'"], {
      cwd: REPO,
      env: { ...process.env, PATH: path, HOME: work },
    });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('stop-'))).toEqual(['stop-apiserver', 'stop-controller-manager', 'stop-etcd', 'stop-kubelet', 'stop-load-balancer', 'stop-scheduler'].map((id) => `${id}\taction`));
    expect(lines).toContain('runbooks/apiserver-outage.yaml');
  }, 60_000);
});
