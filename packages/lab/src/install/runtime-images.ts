import { chmod, chown, copyFile, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { toolVersion } from 'kube-runbook/internal/core/version.js';
import { sha256 } from './binaries.js';
import { cachedImage, type LabImage } from './images.js';
import { must, mustSh, run } from '../host/host.js';
import { withLock } from '../host/lock.js';
import { productRoot } from '../host/product.js';

/**
 * The executor's and the node agent's images (the repository's `Dockerfile` and `deploy/agent/Dockerfile`), built
 * without Docker: the same Debian packages, unpacked from their .deb files (`apt-get download`, `dpkg-deb`) with the
 * shared libraries they need, Node.js 24 (the binary the project runs on), and this project packed (`npm pack`)
 * and installed as `npm install -g` installs it; put together with umoci as the lab's other images are
 * (src/lab/install/images.ts). src/lab/install/runtime-images.test.ts reads both Dockerfiles and checks that
 * RUNTIME_IMAGES says what they do.
 *
 * Node's own binary rather than the single executable of `npm run package`: the Dockerfiles install the packed
 * package under /usr/local/lib/node_modules and run it on node, and the executor needs the files beside dist/ the
 * single executable leaves out (the runbooks, the schema, the lab's kubelet simulator).
 */
export interface RuntimeImageRecipe {
  name: 'executor' | 'agent';
  /** The Dockerfile it stands for, from the package's root. */
  dockerfile: string;
  /** The reference it is built and imported as (under `localhost/`, which no registry serves). */
  ref: string;
  /** The reference the code names it by when nothing else is said: the image is tagged so too where it is imported. */
  alias: string;
  /** The Dockerfile's `apt-get install` packages. */
  packages: string[];
  /** `RUN mkdir -p DIR && chown UID:GID DIR`. */
  dirs: { path: string; owner: string }[];
  env: Record<string, string>;
  user?: string;
  entrypoint: string[];
}

/** The Dockerfiles' base, `node:24-bookworm-slim`: Node's major version and the Debian release. */
export const BASE = { image: 'node:24-bookworm-slim', nodeMajor: 24, debian: 'bookworm' };

/**
 * What the base image gives the runtime besides node: the C and C++ libraries node links against, coreutils (the
 * `env` of the CLI's `#!/usr/bin/env node`) and dash (`/bin/sh`, which the transports' scripts run in).
 */
const BASE_PACKAGES = ['libc6', 'libgcc-s1', 'libstdc++6', 'coreutils', 'dash'];

/** The base image's users: root, and `node` (1000), whom the executor runs as. */
const PASSWD =
  'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n';
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const REPO = 'localhost/kube-runbook';

export function runtimeImages(version = toolVersion()): RuntimeImageRecipe[] {
  return [
    {
      name: 'executor',
      dockerfile: 'Dockerfile',
      ref: `${REPO}/kube-runbook:${version}`,
      alias: `ghcr.io/kube-runbook/kube-runbook:${version}`,
      packages: ['openssh-client', 'iproute2', 'ca-certificates'],
      dirs: [{ path: '/var/lib/kube-runbook', owner: '1000:1000' }],
      env: { KUBE_RUNBOOK_STATE_DIR: '/var/lib/kube-runbook' },
      user: '1000:1000',
      entrypoint: ['kube-runbook'],
    },
    {
      name: 'agent',
      dockerfile: 'deploy/agent/Dockerfile',
      ref: `${REPO}/kube-runbook-agent:${version}`,
      alias: `ghcr.io/kube-runbook/kube-runbook-agent:${version}`,
      packages: ['util-linux', 'ca-certificates'],
      dirs: [],
      env: {},
      entrypoint: ['kube-runbook', 'agent'],
    },
  ];
}

/**
 * Each package's library dependencies in `apt-cache depends` output: its Depends and PreDepends (the first of
 * alternatives, no virtual package) that are libraries, the shared objects its programs load. Other dependencies
 * (debconf, adduser, passwd) are what dpkg's maintainer scripts use, which an unpacked image never runs.
 */
export function libraryDepends(text: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  let deps: string[] = [];
  let alternative = false;
  for (const line of text.split('\n')) {
    if (/^\S/.test(line)) {
      deps = [];
      graph.set(line.trim().replace(/:any$/, ''), deps);
      alternative = false;
      continue;
    }
    const m = /^\s+(\|)?(?:Pre)?Depends:\s+(\S+)/.exec(line);
    if (!m) continue;
    const skip = alternative;
    alternative = m[1] === '|';
    const name = m[2]!.replace(/:any$/, '');
    if (skip || name.startsWith('<')) continue;
    if ((/^lib/.test(name) || name === 'zlib1g') && !deps.includes(name)) deps.push(name);
  }
  return graph;
}

/** `roots` and the library packages they need, transitively, sorted. */
export function withLibraries(roots: string[], graph: Map<string, string[]>): string[] {
  const all = new Set<string>();
  const visit = (p: string) => {
    if (all.has(p)) return;
    all.add(p);
    for (const d of graph.get(p) ?? []) visit(d);
  };
  roots.forEach(visit);
  return [...all].sort();
}

/** The dependency graph under `packages`, in one `apt-cache depends --recurse`. */
async function dependencyGraph(packages: string[], signal?: AbortSignal): Promise<Map<string, string[]>> {
  const args = [
    'depends',
    '--recurse',
    '--no-recommends',
    '--no-suggests',
    '--no-conflicts',
    '--no-breaks',
    '--no-replaces',
    '--no-enhances',
    ...packages,
  ];
  return libraryDepends(await must('LAB_IMAGE_FAILED', 'apt-cache', args, { timeoutMs: 60_000, signal }));
}

/** The file names `apt-get download` gives the packages of `apt-cache show` output: NAME_VERSION_ARCH.deb, the epoch's ":" as "%3a". */
export function debNames(show: string): string[] {
  return show
    .split(/\n\s*\n/)
    .map((stanza) => {
      const field = (f: string) => new RegExp(`^${f}:\\s*(\\S+)$`, 'm').exec(stanza)?.[1];
      const [p, v, a] = [field('Package'), field('Version'), field('Architecture')];
      return p && v && a ? `${p}_${v.replace(':', '%3a')}_${a}.deb` : undefined;
    })
    .filter((f): f is string => f !== undefined);
}

/** The .deb file of each package's candidate version in `debs` (downloaded once). */
async function debFiles(o: { signal?: AbortSignal }, debs: string, packages: string[]): Promise<string[]> {
  const show = await must('LAB_IMAGE_FAILED', 'apt-cache', ['show', '--no-all-versions', ...packages], {
    timeoutMs: 60_000,
    signal: o.signal,
  });
  const files = debNames(show);
  if (files.length !== packages.length)
    throw new KrError('LAB_IMAGE_FAILED', `apt-cache show found ${files.length} of the ${packages.length} packages ${packages.join(' ')}`);
  await mkdir(debs, { recursive: true });
  const have = new Set(await readdir(debs));
  const missing = packages.filter((_, i) => !have.has(files[i]!));
  if (missing.length)
    await must('LAB_IMAGE_FAILED', 'apt-get', ['download', ...missing], { cwd: debs, timeoutMs: 600_000, signal: o.signal });
  const now = new Set(await readdir(debs));
  const absent = files.filter((f) => !now.has(f));
  if (absent.length) throw new KrError('LAB_IMAGE_FAILED', `apt-get download did not write ${absent.join(', ')} in ${debs}`);
  return files.map((f) => join(debs, f));
}

/** The product's root, which `npm pack` packs. */
const packageRoot = productRoot;

/** Node.js of the Dockerfiles' major version: the project's own (its node@24 devDependency), else the running one. */
async function nodeBinary(): Promise<string> {
  for (const f of [join(packageRoot(), 'node_modules', 'node', 'bin', 'node'), process.execPath]) {
    const v = await run(f, ['--version']);
    if (v.code === 0 && v.stdout.trim().startsWith(`v${BASE.nodeMajor}.`)) return f;
  }
  throw new KrError(
    'LAB_IMAGE_FAILED',
    `the images run Node.js ${BASE.nodeMajor}, and neither this project's node_modules/node nor ${process.execPath} is`,
  );
}

export interface BuiltImage extends LabImage {
  recipe: RuntimeImageRecipe;
}

/**
 * The images of `names` (both when not said) in `dir`, rebuilt only when what goes in changed: the recipe, the .deb
 * files, the node binary and the packed project. Runs `npm pack` (about a second) each time to know the latter.
 */
export async function ensureRuntimeImages(
  o: { log: Logger; signal?: AbortSignal },
  dir: string,
  names: RuntimeImageRecipe['name'][] = ['executor', 'agent'],
): Promise<BuiltImage[]> {
  await mkdir(dir, { recursive: true });
  return withLock(join(dir, 'runtime-images.lock'), () => buildAll(o, dir, names), { timeoutMs: 900_000 });
}

async function buildAll(o: { log: Logger; signal?: AbortSignal }, dir: string, names: RuntimeImageRecipe['name'][]): Promise<BuiltImage[]> {
  const node = await nodeBinary();
  const pack = join(dir, 'pack');
  await rm(pack, { recursive: true, force: true });
  await mkdir(pack, { recursive: true });
  // the project's npm on the node the images carry; --ignore-scripts: dist/ is built already (`npm run images` builds)
  const env = { ...process.env, PATH: `${dirname(node)}:${process.env.PATH ?? ''}` };
  await must('LAB_IMAGE_FAILED', 'npm', ['pack', '--ignore-scripts', '--pack-destination', pack, packageRoot()], {
    env,
    timeoutMs: 120_000,
    signal: o.signal,
  });
  const tgz = (await readdir(pack)).find((f) => f.endsWith('.tgz'));
  if (!tgz) throw new KrError('LAB_IMAGE_FAILED', `npm pack wrote no .tgz in ${pack}`);
  const tarball = join(pack, tgz);
  const common = { tarball: await sha256(tarball), node: await sha256(node) };
  const recipes = runtimeImages().filter((r) => names.includes(r.name));
  const graph = await dependencyGraph([...BASE_PACKAGES, ...recipes.flatMap((r) => r.packages)], o.signal);
  const out: BuiltImage[] = [];
  for (const recipe of recipes) {
    const debs = await debFiles(o, join(dir, 'debs'), withLibraries([...BASE_PACKAGES, ...recipe.packages], graph));
    const input = createHash('sha256')
      .update(JSON.stringify({ recipe, common, debs: debs.map((d) => d.slice(d.lastIndexOf('/') + 1)) }))
      .digest('hex');
    const img = await cachedImage(o, dir, recipe.name, recipe.ref, input, async (rootfs) => {
      await fillRootfs(o, rootfs, { recipe, debs, node, tarball, env });
      return {
        entrypoint: recipe.entrypoint,
        user: recipe.user,
        env: [`PATH=${PATH}`, ...Object.entries(recipe.env).map(([k, v]) => `${k}=${v}`)],
      };
    });
    out.push({ ...img, recipe });
  }
  await rm(pack, { recursive: true, force: true });
  return out;
}

async function fillRootfs(
  o: { signal?: AbortSignal },
  rootfs: string,
  i: { recipe: RuntimeImageRecipe; debs: string[]; node: string; tarball: string; env: NodeJS.ProcessEnv },
): Promise<void> {
  // Debian's merged /usr, as in the base image: /bin, /sbin and /lib are links into /usr
  for (const d of ['bin', 'sbin', 'lib', 'lib64']) {
    await mkdir(join(rootfs, 'usr', d), { recursive: true });
    await symlink(join('usr', d), join(rootfs, d));
  }
  for (const deb of i.debs)
    await mustSh(
      'LAB_IMAGE_FAILED',
      `unpacking ${deb}`,
      `dpkg-deb --fsys-tarfile ${shq(deb)} | tar -x --keep-directory-symlink --no-same-owner -C ${shq(rootfs)}\n`,
      { timeoutMs: 120_000, signal: o.signal },
    );
  // what a slim image leaves out (dpkg's path-exclude there), and what update-ca-certificates would write
  for (const d of ['doc', 'man', 'info', 'locale', 'lintian']) await rm(join(rootfs, 'usr', 'share', d), { recursive: true, force: true });
  await symlink('dash', join(rootfs, 'usr', 'bin', 'sh')).catch(() => {});
  if (i.recipe.packages.includes('ca-certificates')) await caBundle(rootfs);
  await mkdir(join(rootfs, 'usr', 'local', 'bin'), { recursive: true });
  await copyFile(i.node, join(rootfs, 'usr', 'local', 'bin', 'node'));
  await chmod(join(rootfs, 'usr', 'local', 'bin', 'node'), 0o755);
  // `npm install -g --omit=dev` of the packed project, into the image's /usr/local, from npm's cache when it has it
  await must(
    'LAB_IMAGE_FAILED',
    'npm',
    [
      'install',
      '-g',
      '--prefix',
      join(rootfs, 'usr', 'local'),
      '--omit=dev',
      '--prefer-offline',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      i.tarball,
    ],
    { env: i.env, timeoutMs: 600_000, signal: o.signal },
  );
  for (const d of ['etc', 'root', 'home/node', 'var/lib']) await mkdir(join(rootfs, d), { recursive: true });
  await chown(join(rootfs, 'home', 'node'), 1000, 1000);
  await mkdir(join(rootfs, 'tmp'), { recursive: true });
  await chmod(join(rootfs, 'tmp'), 0o1777);
  await writeFile(join(rootfs, 'etc', 'passwd'), PASSWD);
  await writeFile(join(rootfs, 'etc', 'group'), GROUP);
  for (const d of i.recipe.dirs) {
    const [uid, gid] = d.owner.split(':').map(Number);
    await mkdir(join(rootfs, d.path), { recursive: true });
    await chown(join(rootfs, d.path), uid!, gid!);
  }
}

/** /etc/ssl/certs/ca-certificates.crt: every certificate the package ships, as its update-ca-certificates joins them. */
async function caBundle(rootfs: string): Promise<void> {
  const base = join(rootfs, 'usr', 'share', 'ca-certificates');
  const files = (await readdir(base, { recursive: true })).filter((f) => f.endsWith('.crt')).sort();
  const pems = await Promise.all(files.map((f) => readFile(join(base, f), 'utf8')));
  await mkdir(join(rootfs, 'etc', 'ssl', 'certs'), { recursive: true });
  await writeFile(join(rootfs, 'etc', 'ssl', 'certs', 'ca-certificates.crt'), pems.map((p) => (p.endsWith('\n') ? p : `${p}\n`)).join(''));
}
