/**
 * The ways kube-runbook installs: the npm tarball installed globally and run on Node 24, and the single executables
 * (Node SEA, `npm run package`) run with no `node` on PATH, linux-arm64's under qemu. No lab needed; builds take a
 * minute or two each.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { ensureAptPackages } from '../../packages/lab/src/install/install.js';
import { Terminal } from '../helpers/terminal.js';
import { ARCHIVE_FILES, archiveName, executableName, PLATFORMS, type Platform } from '../../scripts/sea-lib.mjs';
import { REPO } from './helpers/lab.js';

const built = (p: Platform) => join(REPO, 'build', executableName(p));
const [X64, ARM64] = PLATFORMS as [Platform, Platform];
const EXE = built(X64);
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const QEMU = '/usr/bin/qemu-aarch64';
const log = (what: string) => createLogger((_l, msg) => process.stderr.write(`[${what}] ${msg}\n`));
const NODE24 = join(REPO, 'node_modules', 'node', 'bin', 'node');
let work: string;

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: o.cwd ?? work, env: o.env ?? process.env, maxBuffer: 64 * 1024 * 1024, timeout: 600_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
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
    // dist/ is built (`npm test` builds first); prepack's rebuild would rewrite it under the unit tests beside this file
    const pack = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', work], { cwd: REPO });
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
    const validate = await run(
      bin,
      ['validate', join(prefix, 'lib', 'node_modules', 'kube-runbook', 'runbooks', 'kubelet-partition.yaml')],
      { env },
    );
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
      // `npm run package` without its build step, for the same reason as the pack above
      const r = await run(NODE24, ['scripts/sea.mjs'], { cwd: REPO });
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
    }, 900_000);

    it('runs validate and plan where no node is on PATH, unpacked once into the cache', async () => {
      const env = { PATH: pathWithoutNode(), HOME: work };
      expect((await run('/bin/sh', ['-c', 'command -v node || echo none'], { env })).stdout.trim()).toBe('none');
      const version = await run(EXE, ['--version'], { env });
      expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
      const [unpacked] = readdirSync(join(work, '.cache', 'kube-runbook', 'sea'));
      expect(readFileSync(EXE, 'latin1')).toContain(`\nsum=${unpacked}\n`);
      expect((await run('readelf', ['-h', join(work, '.cache', 'kube-runbook', 'sea', unpacked!, 'kube-runbook')])).stdout).toMatch(
        /Machine:\s+Advanced Micro Devices X86-64\n/,
      );
      const validate = await run(EXE, ['validate', join(REPO, 'runbooks', 'kubelet-partition.yaml')], { env });
      expect(validate.code, validate.stderr).toBe(0);
      expect(validate.stdout).toContain('(Runbook kubelet-partition, 5 steps, 2 guards, 4 objectives)');
      const plan = await run(
        EXE,
        ['plan', join(REPO, 'runbooks', 'kubelet-partition.yaml'), '-i', join(REPO, 'examples', 'inventory-lab.yaml'), '--offline'],
        { env },
      );
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain('revert step 2: block-kubelet-egress on node-1');
      const bad = await run(
        EXE,
        ['validate', join(REPO, 'test', 'fixtures', 'invalid', readdirSync(join(REPO, 'test', 'fixtures', 'invalid'))[0]!)],
        { env },
      );
      expect(bad.code).toBe(2);
      expect(bad.stderr + bad.stdout).not.toContain('    at ');
      // a saved report rendered again, and a broken one placed (each command's libraries are in the bundle)
      const saved = join(REPO, 'examples', 'reports', 'apiserver-outage', 'report.json');
      const html = join(work, 'again.html');
      const report = await run(EXE, ['report', saved, '--html', html], { env });
      expect(report.code, report.stderr).toBe(0);
      expect(readFileSync(html, 'utf8')).toBe(readFileSync(join(REPO, 'examples', 'reports', 'apiserver-outage', 'timeline.html'), 'utf8'));
      writeFileSync(join(work, 'broken.json'), '{\n  "runId": \n}\n');
      const broken = await run(EXE, ['report', join(work, 'broken.json')], { env });
      expect(broken.code).toBe(2);
      expect(broken.stderr).toContain(`${join(work, 'broken.json')}:3:1: not JSON here: value expected`);
    });

    it('bundles neither the lab nor the Kubernetes client’s generated API', () => {
      const meta = JSON.parse(readFileSync(join(REPO, 'build', 'kube-runbook.meta.json'), 'utf8')) as {
        outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
      };
      const inputs = Object.entries(Object.values(meta.outputs)[0]!.inputs);
      const bytes = (files: RegExp) => inputs.filter(([f]) => files.test(f)).reduce((sum, [, i]) => sum + i.bytesInOutput, 0);
      // the lab is a package of its own (packages/lab): none of it, nor a file of the product's that it left behind
      expect(inputs.map(([f]) => f).filter((f) => /packages\/lab\/|dist\/lab\/|dist\/cli\/(lab|demo)\.js$/.test(f))).toEqual([]);
      // its config, for legacy auth-provider users; the whole package is 16 MB
      expect(bytes(/@kubernetes\/client-node\//)).toBeLessThan(1_000_000);
    });

    it('comes with a krew manifest of every platform, whose sha256s are the archives’, each with the executable, LICENSE and completion entry', async () => {
      const manifest = parse(readFileSync(join(REPO, 'build', 'krew', 'runbook.yaml'), 'utf8')) as {
        kind: string;
        metadata: { name: string };
        spec: {
          platforms: {
            sha256: string;
            bin: string;
            uri: string;
            selector: { matchLabels: Record<string, string> };
            files: { from: string }[];
          }[];
        };
      };
      expect(manifest.kind).toBe('Plugin');
      expect(manifest.metadata.name).toBe('runbook');
      expect(manifest.spec.platforms.map((p) => p.selector.matchLabels)).toEqual([
        { os: 'linux', arch: 'amd64' },
        { os: 'linux', arch: 'arm64' },
      ]);
      for (const [i, p] of PLATFORMS.entries()) {
        const listed = manifest.spec.platforms[i]!;
        const archive = join(REPO, 'build', archiveName(p));
        expect(listed.sha256).toBe(createHash('sha256').update(readFileSync(archive)).digest('hex'));
        expect(listed.uri.endsWith(`/${archiveName(p)}`)).toBe(true);
        expect(listed.bin).toBe('kube-runbook');
        const tar = await run('tar', ['-tzvf', archive]);
        expect(
          tar.stdout
            .trim()
            .split('\n')
            .map((l) => `${l.slice(0, 10)} ${l.split(' ').at(-1)}`),
        ).toEqual(['-rwxr-xr-x kube-runbook', '-rwxr-xr-x kubectl_complete-runbook', '-rw-r--r-- LICENSE']);
        expect(listed.files.map((f) => f.from)).toEqual(ARCHIVE_FILES);
        // Node's own binary stripped (103.5 MiB on x64, most of it V8 and ICU's data) and a bundle of 3.3 MiB, gzip-compressed
        // behind the script that unpacks it: the goal is 70 MiB at most
        expect(statSync(built(p)).size / 2 ** 20, executableName(p)).toBeLessThanOrEqual(70);
      }
    });

    it('completes `kubectl runbook` installed as krew lays it out, through the completion entry linked onto PATH', async () => {
      const krew = join(work, 'krew');
      const store = join(krew, 'store', 'runbook', 'v1');
      mkdirSync(store, { recursive: true });
      mkdirSync(join(krew, 'bin'));
      expect((await run('tar', ['-xzf', join(REPO, 'build', archiveName(X64)), '-C', store])).code).toBe(0);
      symlinkSync(join(store, 'kube-runbook'), join(krew, 'bin', 'kubectl-runbook'));
      symlinkSync(join(store, 'kubectl_complete-runbook'), join(krew, 'bin', 'kubectl_complete-runbook'));
      // the entry follows its link with coreutils, which a PATH without node may have left out (Debian's /usr/bin)
      const tools = join(work, 'coreutils');
      mkdirSync(tools);
      for (const t of ['readlink', 'dirname']) symlinkSync(`/usr/bin/${t}`, join(tools, t));
      const env = { PATH: `${join(krew, 'bin')}:${pathWithoutNode()}:${tools}`, HOME: work };
      const help = await run('kubectl-runbook', ['--help'], { env });
      expect(help.stdout).toContain('Usage: kubectl runbook');
      // what kubectl runs for `kubectl runbook describe stop-k<TAB>`
      const completes = await run('kubectl_complete-runbook', ['__complete', 'describe', 'stop-k'], { env });
      expect(completes.stdout.trim().split('\n'), completes.stderr).toEqual(['stop-kubelet\taction', ':4']);
    });

    it('builds linux-arm64 too: it unpacks an aarch64 ELF with the blob injected and the fuse flipped, which runs under qemu', async () => {
      // the script unpacks into the cache, then its exec of an aarch64 ELF fails here: the file unpacked is what runs under qemu
      const cache = join(work, 'arm64-cache');
      await run('/bin/sh', [built(ARM64), '--version'], { env: { PATH: pathWithoutNode(), KUBE_RUNBOOK_CACHE_DIR: cache } });
      const sum = /^sum=([0-9a-f]{64})$/m.exec(readFileSync(built(ARM64), 'latin1'))![1]!;
      const exe = join(cache, 'sea', sum, 'kube-runbook');
      expect(createHash('sha256').update(readFileSync(exe)).digest('hex')).toBe(sum);
      expect((await run('readelf', ['-h', exe])).stdout).toMatch(/Machine:\s+AArch64\n/);
      expect((await run('sh', ['-c', 'readelf -n -W "$1" | grep -o NODE_SEA_BLOB', 'sh', exe])).stdout.trim()).toBe('NODE_SEA_BLOB');
      expect(readFileSync(exe).includes(`${FUSE}:1`)).toBe(true);
      // Debian's qemu-user with the arm64 C and C++ runtimes Node links
      await ensureAptPackages(['qemu-user', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross'], { log: log('qemu') });
      const env = { PATH: pathWithoutNode(), HOME: work };
      const version = await run(QEMU, ['-L', '/usr/aarch64-linux-gnu', exe, '--version'], { env });
      expect(version.stdout.trim(), version.stderr).toBe(JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version);
      const validate = await run(
        QEMU,
        ['-L', '/usr/aarch64-linux-gnu', exe, 'validate', join(REPO, 'runbooks', 'kubelet-partition.yaml')],
        { env },
      );
      expect(validate.code, validate.stderr).toBe(0);
      expect(validate.stdout).toContain('(Runbook kubelet-partition, 5 steps, 2 guards, 4 objectives)');
    }, 600_000);
  });
});

/**
 * `kube-runbook completion zsh|fish` in the real shells, from Debian's packages (bash's is a unit test, bash being
 * everywhere): the same question as there, `kube-runbook describe st<TAB>`, answered with the stop-* actions (and starve-cpu).
 */
describe('shell completion in zsh and fish', () => {
  let path: string;

  beforeAll(async () => {
    await ensureAptPackages(['zsh', 'fish'], { log: log('shells') });
    // kube-runbook on PATH as an installed one is: the built CLI on Node 24
    const bin = join(work, 'shell-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'kube-runbook'), `#!/bin/sh\nexec '${NODE24}' '${join(REPO, 'bin', 'kube-runbook.js')}' "$@"\n`);
    chmodSync(join(bin, 'kube-runbook'), 0o755);
    path = `${bin}:${process.env.PATH}`;
  });

  it('zsh (after compinit): st<TAB> lists the stop-* actions and starve-cpu, the ids it starts', async () => {
    // zle is off on a dumb terminal; under xterm it writes control sequences after the prompt, which Terminal leaves out
    const t = new Terminal('zsh -f -i', { cwd: REPO, env: { PATH: path, TERM: 'xterm', HOME: work } });
    try {
      await t.type(
        "autoload -U compinit; compinit -u; source <(kube-runbook completion zsh); PS1='ready$ '; echo sourced\n",
        /sourced\r?\n[\s\S]*ready\$ $/,
      );
      const listed = await t.type('kube-runbook describe st\t', /stop-scheduler[\s\S]*describe st$/);
      for (const id of ['starve-cpu', 'stop-apiserver', 'stop-controller-manager', 'stop-etcd', 'stop-kubelet', 'stop-load-balancer'])
        expect(listed).toContain(id);
      expect(listed).not.toContain('run-command');
    } finally {
      await t.end('\x15exit\n');
    }
  }, 60_000);

  it("fish: completes describe's ids with what they are, and runbook files", async () => {
    const r = await run(
      'fish',
      [
        '--no-config',
        '-c',
        "kube-runbook completion fish | source; complete -C 'kube-runbook describe st'; complete -C 'kube-runbook plan runbooks/apiserver-ou'",
      ],
      {
        cwd: REPO,
        env: { ...process.env, PATH: path, HOME: work },
      },
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('stop-'))).toEqual(
      ['stop-apiserver', 'stop-controller-manager', 'stop-etcd', 'stop-kubelet', 'stop-load-balancer', 'stop-scheduler'].map(
        (id) => `${id}\taction`,
      ),
    );
    expect(lines).toContain('runbooks/apiserver-outage.yaml');
  }, 60_000);
});
