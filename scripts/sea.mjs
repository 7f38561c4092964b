// `npm run package`: kube-runbook as one executable per platform that needs no Node.js (Node's single executable
// applications). dist/ is bundled by esbuild into one CommonJS file (what SEA runs; the lab and the demo are a
// package of their own, packages/lab, and not in it); the Node 24 of node_modules prepares its blob once (no code cache, no
// snapshot: so the same blob runs in every platform's Node of that version), and postject injects it into each
// platform's Node binary, stripped of its symbols first. Each platform's Node comes from the npm package
// `node-<os>-<cpu>` of the same version, fetched once into ~/.cache/kube-runbook/node/. Writes, per platform of
// scripts/sea-lib.mjs, build/kube-runbook-<platform> and its archive build/kube-runbook-<platform>.tar.gz (the
// executable, LICENSE and the kubectl completion entry), then the krew manifest of all of them, build/krew/runbook.yaml.
//
// The executable shipped is self-extracting (selfExtracting in scripts/sea-lib.mjs): a sh script and the injected Node
// gzip-compressed, 40 MiB instead of 107 (x64; the goal is 70 at most), unpacked once per version into the user's
// cache, its sha256 checked, and exec'd from there by every run. Chosen by measurement (BENCHMARKS.md, single
// executable): later runs start as fast as the plain executable (the script adds a few milliseconds and no fork), the
// first one takes 2-3 s more. The other ways: UPX would decompress the 107 MiB on every run (every TAB of shell
// completion) and is not in Debian 12 (bookworm, this project's machines); Node publishes no smaller official build
// (the npm registry's node-<os>-<cpu> are the full ones, and a Node built without ICU takes hours to build); xz
// instead of gzip would save 12 MiB more but is not on every machine as gzip is, and unpacks slower.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import { cacheDir } from '../packages/lab/dist/host/paths.js';
import { ensureAptPackages } from '../packages/lab/dist/install/install.js';
import { createLogger } from '../dist/core/logger.js';
import { ARCHIVE_FILES, archiveName, completionEntry, executableName, krewManifest, PLATFORMS, selfExtracting } from './sea-lib.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'build');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const hostNode = join(root, 'node_modules', 'node', 'bin', 'node');
const nodeVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'node', 'package.json'), 'utf8')).version;
// the fuse postject flips so that the binary runs the injected blob; Node's documented value
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const log = createLogger((level, msg) => console.error(`${level === 'info' ? '' : `${level}: `}${msg}`));
const MiB = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/** The commit HEAD is at, with `-dirty` when the work tree has changes; null outside a git checkout. */
function gitCommit() {
  try {
    const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return `${git('rev-parse', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') ? '-dirty' : ''}`;
  } catch {
    return null;
  }
}

if (process.platform !== 'linux') throw new Error(`npm run package runs on Linux (this is ${process.platform})`);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const entry = join(out, 'sea-entry.mjs');
// CommonJS has no top-level await: main() handles its own errors and sets the exit code
writeFileSync(entry, `import { main } from '../dist/cli/main.js';\nvoid main(process.argv);\n`);
const bundled = await build({
  entryPoints: [entry],
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  outfile: join(out, 'kube-runbook.cjs'),
  // a fifth of the size; names kept, as error messages and class checks may read them
  minify: true,
  keepNames: true,
  metafile: true,
  // jsonc-parser's main is a UMD build whose factory requires its parts by expression, which a bundle cannot follow;
  // its ES module build is the same code
  alias: { 'jsonc-parser': 'jsonc-parser/lib/esm/main.js' },
  define: {
    // no package.json beside the executable: the version is written in (src/core/version.ts)
    __KUBE_RUNBOOK_VERSION__: JSON.stringify(pkg.version),
    // the commit built from, for `kube-runbook version` (null outside a git checkout)
    __KUBE_RUNBOOK_COMMIT__: JSON.stringify(gitCommit()),
    'import.meta.url': JSON.stringify('file:///kube-runbook-sea/dist/cli/main.js'),
  },
  logLevel: 'warning',
});
// what is in the bundle, by input (for esbuild's analyzer: `npx esbuild --analyze` or its web page)
writeFileSync(join(out, 'kube-runbook.meta.json'), JSON.stringify(bundled.metafile));

const config = join(out, 'sea-config.json');
const blob = join(out, 'sea-prep.blob');
writeFileSync(
  config,
  JSON.stringify({
    main: join(out, 'kube-runbook.cjs'),
    output: blob,
    disableExperimentalSEAWarning: true,
    useCodeCache: false,
    useSnapshot: false,
  }),
);
execFileSync(hostNode, ['--experimental-sea-config', config], { stdio: 'inherit' });

const strip = await llvmStrip();
const archives = [];
for (const platform of PLATFORMS) {
  const exe = join(out, executableName(platform));
  const injected = `${exe}.unpacked`;
  // the symbol tables and debug info: 17 MiB of Node's 121 MiB (x64), which nothing it runs needs
  execFileSync(strip, ['--strip-all', '-o', injected, await nodeBinary(platform)]);
  chmodSync(injected, 0o755);
  execFileSync(
    hostNode,
    [join(root, 'node_modules', 'postject', 'dist', 'cli.js'), injected, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', FUSE],
    {
      stdio: 'ignore',
    },
  );
  check(injected, platform);
  const unpacked = readFileSync(injected);
  writeFileSync(exe, selfExtracting({ version: pkg.version, platform, unpacked }), { mode: 0o755 });
  rmSync(injected);
  const archive = join(out, archiveName(platform));
  writeArchive(exe, archive);
  archives.push({ platform, sha256: createHash('sha256').update(readFileSync(archive)).digest('hex') });
  log.info(`${exe}: ${MiB(statSync(exe).size)} (${MiB(unpacked.length)} unpacked); ${archive}: ${MiB(statSync(archive).size)}`);
}
for (const f of ['sea-entry.mjs', 'sea-config.json', 'sea-prep.blob']) rmSync(join(out, f));
mkdirSync(join(out, 'krew'), { recursive: true });
writeFileSync(join(out, 'krew', 'runbook.yaml'), krewManifest(pkg.version, archives));
log.info(
  `bundle ${MiB(statSync(join(out, 'kube-runbook.cjs')).size)}; wrote build/krew/runbook.yaml for ${PLATFORMS.map((p) => p.name).join(', ')}`,
);

/** The Node binary of PLATFORM at nodeVersion: this project's own when it is that platform's, else the cached one. */
async function nodeBinary(platform) {
  const own = join(root, 'node_modules', 'node', 'node_modules', platform.nodePackage, 'package.json');
  if (existsSync(own) && JSON.parse(readFileSync(own, 'utf8')).version === nodeVersion) return hostNode;
  const dir = join(cacheDir(), 'node', `${platform.nodePackage}-${nodeVersion}`);
  const bin = join(dir, 'bin', 'node');
  if (existsSync(bin)) return bin;
  log.info(`fetching ${platform.nodePackage}@${nodeVersion} from the npm registry into ${dir}`);
  mkdirSync(join(cacheDir(), 'node'), { recursive: true });
  const tmp = mkdtempSync(join(cacheDir(), 'node', '.fetch-'));
  try {
    // npm checks the tarball against the registry's integrity
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', `${platform.nodePackage}@${nodeVersion}`, '--json', '--pack-destination', tmp], { encoding: 'utf8' }),
    );
    execFileSync('tar', ['-xzf', join(tmp, packed.filename), '-C', tmp, 'package/bin/node']);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(tmp, 'package'), dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

/** llvm-strip, which strips every platform's binary (binutils' strip only the host's); from Debian's llvm if missing. */
async function llvmStrip() {
  const found = () => execFileSync('sh', ['-c', 'command -v llvm-strip || true'], { encoding: 'utf8' }).trim();
  if (!found()) await ensureAptPackages(['llvm'], { log });
  return found();
}

/** Refuses an executable that is not PLATFORM's, has no blob, or whose fuse is not flipped. */
function check(exe, platform) {
  const machine = /Machine:\s*(.+)/.exec(execFileSync('readelf', ['-h', exe], { encoding: 'utf8' }))?.[1]?.trim();
  if (machine !== platform.machine) throw new Error(`${exe} is for ${machine}, not ${platform.machine}`);
  // the note's data is printed too, in hex: three times the blob
  if (!execFileSync('readelf', ['-n', '-W', exe], { encoding: 'utf8', maxBuffer: 256 * 2 ** 20 }).includes('NODE_SEA_BLOB'))
    throw new Error(`${exe} has no NODE_SEA_BLOB note`);
  if (!readFileSync(exe).includes(`${FUSE}:1`)) throw new Error(`${exe}'s SEA fuse is not flipped`);
}

/** ARCHIVE: the archive krew downloads, ARCHIVE_FILES at its top level (krew links `kube-runbook` as kubectl-runbook). */
function writeArchive(exe, archive) {
  const staging = mkdtempSync(join(out, '.archive-'));
  copyFileSync(exe, join(staging, 'kube-runbook'));
  writeFileSync(join(staging, 'kubectl_complete-runbook'), completionEntry());
  copyFileSync(join(root, 'LICENSE'), join(staging, 'LICENSE'));
  for (const f of ['kube-runbook', 'kubectl_complete-runbook']) chmodSync(join(staging, f), 0o755);
  chmodSync(join(staging, 'LICENSE'), 0o644);
  execFileSync('tar', ['-czf', archive, '--owner=0', '--group=0', '--numeric-owner', '-C', staging, ...ARCHIVE_FILES]);
  rmSync(staging, { recursive: true });
}
