// `npm run package`: kube-runbook as one executable for linux-x64 that needs no Node.js (Node's single executable
// applications): dist/ bundled by esbuild into one CommonJS file (what SEA runs), its preparation blob made by the
// Node 24 of node_modules, and injected into a copy of that Node binary by postject. Writes build/kube-runbook-linux-x64
// build/kube-runbook-linux-x64.tar.gz and the krew plugin manifest for it, build/krew/runbook.yaml.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'build');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const nodeBin = join(root, 'node_modules', 'node', 'bin', 'node');
const exe = join(out, 'kube-runbook-linux-x64');
// the fuse postject flips so that the binary runs the injected blob; Node's documented value
/** Where releases are published (the krew manifest's download URL). */
const RELEASES = 'https://github.com/kube-runbook/kube-runbook/releases';
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`npm run package builds linux-x64 only (this is ${process.platform}-${process.arch})`);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const entry = join(out, 'sea-entry.mjs');
// CommonJS has no top-level await: main() handles its own errors and sets the exit code
writeFileSync(entry, `import { main } from '../dist/cli/main.js';\nvoid main(process.argv);\n`);
await build({
  entryPoints: [entry],
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  outfile: join(out, 'kube-runbook.cjs'),
  define: {
    // no package.json beside the executable: the version is written in (src/core/version.ts)
    __KUBE_RUNBOOK_VERSION__: JSON.stringify(pkg.version),
    // files found next to dist/ (the lab's kubelet simulator, the demo's runbook) are not in the executable
    'import.meta.url': JSON.stringify('file:///kube-runbook-sea/dist/cli/main.js'),
  },
  logLevel: 'warning',
});

const config = join(out, 'sea-config.json');
writeFileSync(config, JSON.stringify({ main: join(out, 'kube-runbook.cjs'), output: join(out, 'sea-prep.blob'), disableExperimentalSEAWarning: true, useCodeCache: false }));
execFileSync(nodeBin, ['--experimental-sea-config', config], { stdio: 'inherit' });
copyFileSync(nodeBin, exe);
chmodSync(exe, 0o755);
execFileSync(process.execPath, [join(root, 'node_modules', 'postject', 'dist', 'cli.js'), exe, 'NODE_SEA_BLOB', join(out, 'sea-prep.blob'), '--sentinel-fuse', FUSE], {
  stdio: 'inherit',
});
for (const f of ['sea-entry.mjs', 'sea-config.json', 'sea-prep.blob']) rmSync(join(out, f));
// the archive krew downloads holds the executable as `kube-runbook`; krew links it as kubectl-runbook
const staging = join(out, 'archive');
mkdirSync(staging);
copyFileSync(exe, join(staging, 'kube-runbook'));
chmodSync(join(staging, 'kube-runbook'), 0o755);
const archive = `${exe}.tar.gz`;
execFileSync('tar', ['-czf', archive, '-C', staging, 'kube-runbook'], { stdio: 'inherit' });
rmSync(staging, { recursive: true });
const sha256 = createHash('sha256').update(readFileSync(archive)).digest('hex');
mkdirSync(join(out, 'krew'), { recursive: true });
writeFileSync(join(out, 'krew', 'runbook.yaml'), krewManifest(pkg.version, sha256));
console.log(`wrote ${exe}, ${archive} and build/krew/runbook.yaml`);

/** The krew plugin manifest for this archive, to publish with the release (krew-index: plugins/runbook.yaml). */
function krewManifest(version, sha) {
  return `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: runbook
spec:
  version: v${version}
  homepage: ${RELEASES.replace(/\/releases$/, '')}
  shortDescription: Chaos-engineering runbooks with guards that stop eviction cascades
  description: |
    kube-runbook runs YAML runbooks of faults and probes against a cluster; guards abort or remediate before the
    node lifecycle controller evicts pods, and every fault is rolled back. A single executable: no Node.js needed.
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: ${RELEASES}/download/v${version}/kube-runbook-linux-x64.tar.gz
      sha256: ${sha}
      bin: kube-runbook
`;
}
