import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { ARCHIVE_FILES, completionEntry, krewManifest, PLATFORMS } from '../scripts/sea-lib.mjs';

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
