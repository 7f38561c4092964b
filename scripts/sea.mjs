// `npm run package`: kube-runbook as one executable for linux-x64 that needs no Node.js (Node's single executable
// applications): dist/ bundled by esbuild into one CommonJS file (what SEA runs), its preparation blob made by the
// Node 24 of node_modules, and injected into a copy of that Node binary by postject. Writes build/kube-runbook-linux-x64
// and build/kube-runbook-linux-x64.tar.gz (for the krew manifest, deploy/krew/runbook.yaml).
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'build');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const nodeBin = join(root, 'node_modules', 'node', 'bin', 'node');
const exe = join(out, 'kube-runbook-linux-x64');
// the fuse postject flips so that the binary runs the injected blob; Node's documented value
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
    // no package.json beside the executable: the version is written in (src/cli/version.ts)
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
execFileSync('tar', ['-czf', `${exe}.tar.gz`, '-C', out, 'kube-runbook-linux-x64'], { stdio: 'inherit' });
console.log(`wrote ${exe} and ${exe}.tar.gz`);
