import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
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
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { ARCHIVE_FILES, completionEntry, krewManifest, PLATFORMS, selfExtracting } from '../scripts/sea-lib.mjs';

interface Manifest {
  kind: string;
  metadata: { name: string };
  spec: {
    version: string;
    caveats: string;
    platforms: {
      selector: { matchLabels: Record<string, string> };
      uri: string;
      sha256: string;
      bin: string;
      files: { from: string; to: string }[];
    }[];
  };
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the krew manifest of `npm run package`', () => {
  const archives = PLATFORMS.map((platform, i) => ({ platform, sha256: String(i).repeat(64) }));
  const manifest = parse(krewManifest('1.2.3', archives)) as Manifest;

  it('lists each platform built, with its archive and that archive’s sha256', () => {
    expect(manifest.kind).toBe('Plugin');
    expect(manifest.metadata.name).toBe('runbook');
    expect(manifest.spec.version).toBe('v1.2.3');
    expect(manifest.spec.platforms.map((p) => p.selector.matchLabels)).toEqual([
      { os: 'linux', arch: 'amd64' },
      { os: 'linux', arch: 'arm64' },
    ]);
    expect(manifest.spec.platforms.map((p) => p.uri.split('/').slice(-2).join('/'))).toEqual([
      'v1.2.3/kube-runbook-linux-x64.tar.gz',
      'v1.2.3/kube-runbook-linux-arm64.tar.gz',
    ]);
    expect(manifest.spec.platforms.map((p) => p.sha256)).toEqual(['0'.repeat(64), '1'.repeat(64)]);
  });

  it('installs the executable as the plugin and the licence and completion entry beside it, and says how to use the latter', () => {
    for (const p of manifest.spec.platforms) {
      expect(p.bin).toBe('kube-runbook');
      expect(p.files).toEqual(ARCHIVE_FILES.map((from) => ({ from, to: '.' })));
    }
    expect(ARCHIVE_FILES).toEqual(expect.arrayContaining(['kube-runbook', 'LICENSE', 'kubectl_complete-runbook']));
    expect(manifest.spec.caveats).toContain('/store/runbook/v1.2.3/kubectl_complete-runbook');
  });
});

describe('the completion entry in the archives', () => {
  it('asks the executable beside it (through a link on PATH) in Cobra’s protocol, for the words after __complete', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-sea-'));
    dirs.push(dir);
    const store = join(dir, 'store');
    const bin = join(dir, 'bin');
    mkdirSync(store);
    mkdirSync(bin);
    writeFileSync(join(store, 'kube-runbook'), '#!/bin/sh\nfor a in "$@"; do echo "[$a]"; done\n');
    writeFileSync(join(store, 'kubectl_complete-runbook'), completionEntry());
    for (const f of ['kube-runbook', 'kubectl_complete-runbook']) chmodSync(join(store, f), 0o755);
    symlinkSync(join(store, 'kubectl_complete-runbook'), join(bin, 'kubectl_complete-runbook'));
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile('kubectl_complete-runbook', ['__complete', 'describe', 'stop k'], { env: { PATH: `${bin}:/usr/bin:/bin` } }, (err, out) =>
        err ? reject(err) : resolve(out),
      ),
    );
    expect(stdout.trim().split('\n')).toEqual(['[__complete]', '[--cobra]', '[--]', '[describe]', '[stop k]']);
  });
});

describe('the self-extracting executable', () => {
  // stands in for Node's binary: says the name it was run as and its arguments
  const unpacked = Buffer.from(`#!/bin/sh\necho "\${0##*/}:$*"\n${'# padding\n'.repeat(1000)}`);
  const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const sum = sha256(unpacked);
  const exe = selfExtracting({ version: '1.2.3', platform: PLATFORMS[0]!, unpacked });

  interface Ran {
    code: number;
    stdout: string;
    stderr: string;
  }
  const run = (file: string, args: string[], env: NodeJS.ProcessEnv) =>
    new Promise<Ran>((resolve) =>
      execFile(file, args, { env }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      ),
    );
  /** A directory with the executable as bin/kube-runbook, FILE (default: the one built above). */
  const installed = (file = exe) => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-sfx-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'bin'));
    writeFileSync(join(dir, 'bin', 'kube-runbook'), file, { mode: 0o755 });
    // no coreutils on PATH: the script finds them in /usr/bin and /bin itself
    return {
      dir,
      exe: join(dir, 'bin', 'kube-runbook'),
      env: { PATH: join(dir, 'bin'), KUBE_RUNBOOK_CACHE_DIR: join(dir, 'cache'), TMPDIR: join(dir, 'tmp') },
    };
  };

  it('is a sh script and the executable gzip-compressed, which the script says how to unpack by hand', () => {
    const offset = Number(/tail -c \+(\d+) FILE \| gzip -dc/.exec(exe.toString('latin1'))![1]);
    expect(exe.subarray(0, 10).toString()).toBe('#!/bin/sh\n');
    expect(exe.toString('latin1')).toContain(`sum=${sum}\n`);
    expect(gzipSync(unpacked).length).toBeLessThan(unpacked.length / 10);
    expect(exe.length).toBeLessThan(unpacked.length / 2);
    expect(readFileSync(join(installed().dir, 'bin', 'kube-runbook')).subarray(offset - 1)).toEqual(exe.subarray(offset - 1));
  });

  it('unpacks into the cache on its first run, checked, and runs what is there from then on without reading itself again', async () => {
    const i = installed();
    const first = await run(i.exe, ['validate', 'a b.yaml'], i.env);
    expect(first, first.stderr).toEqual({ code: 0, stdout: 'kube-runbook:validate a b.yaml\n', stderr: '' });
    const dir = join(i.dir, 'cache', 'sea', sum);
    expect(readFileSync(join(dir, 'kube-runbook'))).toEqual(unpacked);
    expect(statSync(join(dir, 'kube-runbook')).mode & 0o777).toBe(0o500);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir).sort()).toEqual(['kube-runbook', 'kubectl-runbook']);
    // the same script with its payload cut off still runs: it did not unpack again
    writeFileSync(i.exe, exe.subarray(0, exe.length - 100), { mode: 0o755 });
    const again = await run(i.exe, ['--version'], i.env);
    expect(again).toEqual({ code: 0, stdout: 'kube-runbook:--version\n', stderr: '' });
  });

  it('runs as kubectl-runbook when linked as krew links it', async () => {
    const i = installed();
    symlinkSync(i.exe, join(i.dir, 'bin', 'kubectl-runbook'));
    for (const round of [1, 2]) {
      const r = await run(join(i.dir, 'bin', 'kubectl-runbook'), ['--help'], i.env);
      expect(r, `run ${round}`).toEqual({ code: 0, stdout: 'kubectl-runbook:--help\n', stderr: '' });
    }
  });

  it('has concurrent first runs each put a whole, checked file in place, leaving nothing half-written', async () => {
    const i = installed();
    const runs = await Promise.all([1, 2, 3, 4, 5].map((n) => run(i.exe, [`run ${n}`], i.env)));
    expect(runs.map((r) => r.stdout)).toEqual([1, 2, 3, 4, 5].map((n) => `kube-runbook:run ${n}\n`));
    expect(readdirSync(join(i.dir, 'cache', 'sea', sum)).sort()).toEqual(['kube-runbook', 'kubectl-runbook']);
    expect(readFileSync(join(i.dir, 'cache', 'sea', sum, 'kube-runbook'))).toEqual(unpacked);
  });

  it('replaces a link put in place of the unpacked file by a checked copy, and never runs what it points to', async () => {
    const i = installed();
    const dir = join(i.dir, 'cache', 'sea', sum);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(i.dir, 'planted'), '#!/bin/sh\necho planted\n', { mode: 0o755 });
    symlinkSync(join(i.dir, 'planted'), join(dir, 'kube-runbook'));
    const r = await run(i.exe, ['x'], i.env);
    expect(r.stdout).toBe('kube-runbook:x\n');
    expect(lstatSync(join(dir, 'kube-runbook')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(dir, 'kube-runbook'))).toEqual(unpacked);
  });

  it('refuses to run a payload whose sha256 is not the one written in it, and leaves no file behind', async () => {
    const otherUnpacked = Buffer.from(unpacked.toString().replace('echo', 'exit 0; echo'));
    const other = selfExtracting({ version: '1.2.3', platform: PLATFORMS[0]!, unpacked: otherUnpacked });
    const gzipMagic = Buffer.from([0x1f, 0x8b, 0x08]);
    const tampered = Buffer.concat([exe.subarray(0, exe.indexOf(gzipMagic)), other.subarray(other.indexOf(gzipMagic))]);
    const i = installed(tampered);
    const r = await run(i.exe, ['x'], i.env);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `kube-runbook: ${i.exe} is damaged (it unpacks to sha256 ${sha256(otherUnpacked)}, not ${sum}): download it again\n`,
    );
    expect(readdirSync(join(i.dir, 'cache', 'sea', sum)).filter((f) => f !== 'kubectl-runbook')).toEqual([]);
  });

  it('says in one line that a download cut short is damaged', async () => {
    const i = installed(exe.subarray(0, exe.length - 100));
    const r = await run(i.exe, ['x'], i.env);
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: `kube-runbook: ${i.exe} is damaged (its compressed part is cut short or corrupt): download it again\n`,
    });
    expect(readdirSync(join(i.dir, 'cache', 'sea', sum)).filter((f) => f !== 'kubectl-runbook')).toEqual([]);
  });

  it('unpacks under TMPDIR when the cache cannot be written, and says so in one line when neither can', async () => {
    const i = installed();
    writeFileSync(join(i.dir, 'file'), '');
    const env = { ...i.env, KUBE_RUNBOOK_CACHE_DIR: join(i.dir, 'file', 'cache') };
    mkdirSync(join(i.dir, 'tmp'));
    const r = await run(i.exe, ['x'], env);
    expect(r).toEqual({ code: 0, stdout: 'kube-runbook:x\n', stderr: '' });
    const uid = process.getuid!();
    expect(existsSync(join(i.dir, 'tmp', `kube-runbook-${uid}`, 'sea', sum, 'kube-runbook'))).toBe(true);
    const neither = await run(i.exe, ['x'], { ...env, TMPDIR: join(i.dir, 'file', 'tmp') });
    expect(neither.code).toBe(1);
    expect(neither.stdout).toBe('');
    expect(neither.stderr).toBe(
      `kube-runbook: cannot unpack into ${join(i.dir, 'file', 'cache', 'sea', sum)} or ${join(i.dir, 'file', 'tmp', `kube-runbook-${uid}`, 'sea', sum)}: set KUBE_RUNBOOK_CACHE_DIR to a directory of yours that can be written and executed from\n`,
    );
  });
});
