import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareVersions, findLabBinaries, KUBE_BINARIES, parseLabVersion, sha256, verifyCached, writeCacheEntry } from './binaries.js';
import { debianGoEnv } from './build.js';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';

/** A stand-in for a Kubernetes binary: prints a version like the real ones. */
const fakeBinary = (version: string) => `#!/bin/sh\necho "Kubernetes v${version}"\n`;

async function cacheEntry(root: string, version: string): Promise<string> {
  const dir = join(root, `kubernetes-${version}`);
  await mkdir(dir, { recursive: true });
  const files: Record<string, { sha256: string; size: number }> = {};
  for (const b of KUBE_BINARIES) {
    await writeFile(join(dir, b), fakeBinary(version));
    await chmod(join(dir, b), 0o755);
    files[b] = { sha256: await sha256(join(dir, b)), size: 1 };
  }
  await writeFile(
    join(dir, 'manifest.json'),
    JSON.stringify({ kind: 'kube-runbook/lab-binaries', version, source: 'test', builtAt: '', files }),
  );
  return dir;
}

describe('lab binaries', () => {
  let root: string;
  tempDirEach('kr-bin-', (d) => (root = d));

  it('orders versions numerically', () => {
    expect(compareVersions('1.20.10', '1.20.9')).toBeGreaterThan(0);
    expect(compareVersions('1.9.0', '1.20.0')).toBeLessThan(0);
    expect(compareVersions('1.20.2', '1.20.2')).toBe(0);
  });

  it('uses the newest cache entry whose checksums match', async () => {
    await cacheEntry(root, '1.20.2');
    const newer = await cacheEntry(root, '1.21.0');
    await writeFile(join(newer, 'kube-scheduler'), 'tampered');
    expect(await verifyCached(newer)).toBe('kube-scheduler does not match its checksum');
    const found = await findLabBinaries({ cacheDir: root, env: { PATH: '/nonexistent' } });
    expect(found?.version).toBe('1.20.2');
    expect(found?.kubeApiserver).toBe(join(root, 'kubernetes-1.20.2', 'kube-apiserver'));
  });

  it('writes a cache entry whole: the programs executable, a manifest of their checksums and sizes, nothing left over', async () => {
    const from = join(root, 'out');
    const entry = join(root, 'entry');
    await mkdir(from);
    await mkdir(entry);
    await writeFile(join(entry, 'stale'), 'from an earlier build');
    await writeFile(join(from, 'a'), 'alpha\n', { mode: 0o600 });
    await writeFile(join(from, 'b'), 'beta, longer\n', { mode: 0o600 });
    await writeCacheEntry(entry, from, ['a', 'b'], (files) => ({ kind: 'test', files }));
    expect((await readdir(root)).sort()).toEqual(['entry', 'out']);
    expect((await readdir(entry)).sort()).toEqual(['a', 'b', 'manifest.json']);
    const manifest = JSON.parse(await readFile(join(entry, 'manifest.json'), 'utf8')) as { kind: string; files: object };
    expect(manifest.kind).toBe('test');
    for (const [name, text] of [
      ['a', 'alpha\n'],
      ['b', 'beta, longer\n'],
    ] as const) {
      expect(await readFile(join(entry, name), 'utf8')).toBe(text);
      expect((await stat(join(entry, name))).mode & 0o777).toBe(0o755);
      expect(manifest.files).toHaveProperty(name, { sha256: await sha256(join(from, name)), size: Buffer.byteLength(text) });
    }
  });

  it('finds nothing in an empty cache', async () => {
    expect(await findLabBinaries({ cacheDir: join(root, 'none'), env: {} })).toBeUndefined();
  });

  it('uses a --bin-dir as it is, and names what it lacks', async () => {
    const dir = await cacheEntry(root, '1.30.1');
    await writeFile(join(dir, 'etcd'), '#!/bin/sh\n');
    await chmod(join(dir, 'etcd'), 0o755);
    const found = await findLabBinaries({ binDir: dir, env: {} });
    expect(found).toMatchObject({ version: '1.30.1', etcd: join(dir, 'etcd'), kubeScheduler: join(dir, 'kube-scheduler') });
    await rm(join(dir, 'kube-controller-manager'));
    await expect(findLabBinaries({ binDir: dir, env: {} })).rejects.toThrow(/--bin-dir ".*" lacks kube-controller-manager/);
    await expect(findLabBinaries({ env: { KUBEBUILDER_ASSETS: dir } })).rejects.toThrow(/KUBEBUILDER_ASSETS/);
  });
});

describe('lab Kubernetes versions', () => {
  it('1.37 by default; 1.34 and 1.20 by minor; an exact patch for the Go-module route only', () => {
    expect(parseLabVersion(undefined)).toEqual({ minor: 37 });
    expect(parseLabVersion('v1.34')).toEqual({ minor: 34, version: undefined });
    expect(parseLabVersion('1.37.2')).toEqual({ minor: 37, version: '1.37.2' });
    expect(() => parseLabVersion('1.20.2')).toThrow(/give 1.20/);
    expect(() => parseLabVersion('1.30')).toThrow(expect.objectContaining({ code: 'LAB_VERSION_UNSUPPORTED', exit: 2 }));
  });

  it("the Debian build gets Debian's Go and none of this machine's GO variables", () => {
    const env = debianGoEnv('/src', {
      PATH: '/usr/local/go/bin:/usr/bin',
      GOROOT: '/usr/local/go',
      GOTOOLCHAIN: 'go1.26.8',
      GOFLAGS: '-mod=mod',
      GOPATH: '/root/go',
      HOME: '/root',
      BASH_ENV: '/root/.bashrc',
    });
    expect(env).toMatchObject({ GOROOT: '/usr/lib/go', GOPATH: '/src/.go', GOFLAGS: '', GO111MODULE: 'off', GOENV: 'off' });
    expect(env.PATH!.startsWith('/usr/lib/go/bin:')).toBe(true);
    // no shell startup file of the user's is read by the build's bash scripts (one may put a newer Go first on PATH)
    expect(env.HOME).toBe('/src/.go/home');
    expect(env.BASH_ENV).toBeUndefined();
  });
});
