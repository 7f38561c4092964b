import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, chmod, constants, copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { run } from '../host/host.js';
import type { LabBinariesInfo } from '../host/info.js';
import { cacheDir as defaultCacheDir } from '../host/paths.js';

export const KUBE_BINARIES = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export type KubeBinary = (typeof KUBE_BINARIES)[number];

/**
 * Commands of the release built beside the control plane when first needed (`ensureReleaseCommand`): the kubelet of
 * real nodes and kubeadm (`lab up --kubeadm`; the Go-module route also builds it with the control plane).
 */
export const RELEASE_COMMANDS = ['kubelet', 'kubeadm'] as const;
export type ReleaseCommand = (typeof RELEASE_COMMANDS)[number];

/**
 * The Kubernetes versions the lab supports: 1.37 (the default) and 1.34 are built with the machine's Go from the
 * Go module proxy, with the etcd each is tested with; 1.20 from Debian's `kubernetes` source package, with Debian's
 * etcd 3.4.
 */
export const SUPPORTED_MINORS = [37, 34, 20] as const;
export const DEFAULT_MINOR = 37;

/** The route that builds a minor version. */
export const routeOf = (minor: number): 'debian' | 'go-modules' => (minor === 20 ? 'debian' : 'go-modules');

/** `1.37`, `v1.37`, `1.37.2` → the minor and, when given, the exact patch release; KrError (exit 2) otherwise. */
export function parseLabVersion(text: string | undefined): { minor: number; version?: string } {
  if (text === undefined) return { minor: DEFAULT_MINOR };
  const m = /^v?1\.(\d+)(?:\.(\d+))?$/.exec(text.trim());
  const minor = m ? Number(m[1]) : NaN;
  if (!m || !(SUPPORTED_MINORS as readonly number[]).includes(minor))
    throw new KrError(
      'LAB_VERSION_UNSUPPORTED',
      `--kubernetes-version ${quote(text)}: the lab supports ${SUPPORTED_MINORS.map((v) => `1.${v}`).join(', ')}`,
      {
        exit: EXIT.invalid,
      },
    );
  if (m[2] !== undefined && routeOf(minor) === 'debian')
    throw new KrError(
      'LAB_VERSION_UNSUPPORTED',
      `--kubernetes-version ${quote(text)}: 1.20 comes from Debian's source package, whatever patch it holds: give 1.20`,
      {
        exit: EXIT.invalid,
      },
    );
  return { minor, version: m[2] !== undefined ? `1.${minor}.${m[2]}` : undefined };
}

/** `manifest.json` of a cache directory `kubernetes-<version>/`. */
export interface BinaryManifest {
  kind: 'kube-runbook/lab-binaries';
  version: string;
  source: string;
  builtAt: string;
  /** How long the download and the build took (seconds), and with which Go. */
  build?: { downloadSeconds: number; buildSeconds: number; go: string };
  /** etcd built beside the Kubernetes binaries (the Go-module route); absent when the machine's etcd is used. */
  etcd?: { version: string };
  /** The kubelet built later for real nodes (`lab up --real-nodes`), and how long that took. */
  kubelet?: { buildSeconds: number };
  /** kubeadm built later for `lab up --kubeadm` when the cache predates it, and how long that took. */
  kubeadm?: { buildSeconds: number };
  files: Partial<Record<KubeBinary | ReleaseCommand | 'etcd' | 'etcdctl', { sha256: string; size: number }>>;
}

export interface FindOptions {
  /** Binaries the user already has (kube-apiserver, kube-controller-manager, kube-scheduler, optionally etcd). */
  binDir?: string;
  /** Only a cached build of this minor version (and patch, when given); any version when absent. */
  release?: { minor: number; version?: string };
  cacheDir?: string;
  env?: NodeJS.ProcessEnv;
  log?: Logger;
}

/** Looks for the binaries: `binDir`, else `KUBEBUILDER_ASSETS`, else the cache. Undefined when the cache has none. */
export async function findLabBinaries(o: FindOptions = {}): Promise<LabBinariesInfo | undefined> {
  const env = o.env ?? process.env;
  const userDir = o.binDir ?? env.KUBEBUILDER_ASSETS;
  if (userDir) return fromUserDir(resolve(userDir), o.binDir ? '--bin-dir' : 'KUBEBUILDER_ASSETS', env);
  const root = o.cacheDir ?? defaultCacheDir(env);
  for (const dir of await cachedDirs(root)) {
    const v = dir.slice(dir.lastIndexOf('kubernetes-') + 'kubernetes-'.length);
    if (o.release && (!v.startsWith(`1.${o.release.minor}.`) || (o.release.version && v !== o.release.version))) continue;
    const problem = await verifyCached(dir);
    if (problem) {
      o.log?.warn(`ignoring ${dir}: ${problem}`);
      continue;
    }
    const manifest = await readManifest(dir);
    if (!manifest) continue;
    return {
      dir,
      version: manifest.version,
      ...paths(dir),
      etcd: manifest.files.etcd ? join(dir, 'etcd') : await findEtcd(undefined, env),
    };
  }
  return undefined;
}

/** Cache directories, newest version first. */
async function cachedDirs(root: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(root);
  } catch {
    return [];
  }
  return names
    .filter((n) => /^kubernetes-\d+\.\d+\.\d+/.test(n) && !n.endsWith('.tmp'))
    .sort((a, b) => compareVersions(b.slice(11), a.slice(11)))
    .map((n) => join(root, n));
}

export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.+-]/).map((x) => Number.parseInt(x, 10));
  const pb = b.split(/[.+-]/).map((x) => Number.parseInt(x, 10));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (Number.isNaN(pa[i] ?? 0) ? 0 : (pa[i] ?? 0)) - (Number.isNaN(pb[i] ?? 0) ? 0 : (pb[i] ?? 0));
    if (d) return d;
  }
  return 0;
}

async function readManifest(dir: string): Promise<BinaryManifest | undefined> {
  try {
    const m = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as BinaryManifest;
    return m.kind === 'kube-runbook/lab-binaries' ? m : undefined;
  } catch {
    return undefined;
  }
}

/** Undefined when every binary of the manifest is there with its checksum; else what is wrong. */
export async function verifyCached(dir: string): Promise<string | undefined> {
  const m = await readManifest(dir);
  if (!m) return 'no manifest.json';
  for (const name of KUBE_BINARIES) if (!m.files[name]) return `the manifest lists no ${name}`;
  for (const [name, want] of Object.entries(m.files)) {
    const file = join(dir, name);
    let got: string;
    try {
      got = await sha256(file);
    } catch {
      return `${name} is missing`;
    }
    if (got !== want.sha256) return `${name} does not match its checksum`;
  }
  return undefined;
}

export function sha256(file: string): Promise<string> {
  return new Promise((res, rej) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('data', (b) => h.update(b))
      .on('error', rej)
      .on('end', () => res(h.digest('hex')));
  });
}

/** What a cache entry's manifest says of each of its programs. */
export type FileSum = { sha256: string; size: number };

/**
 * Makes the cache entry `dir`: each of `names` copied from the directory `from`, executable, and a manifest.json of
 * what `manifest` makes of their checksums and sizes. Written as `dir.tmp` and renamed into place, so a reader finds
 * the whole entry or none.
 */
export async function writeCacheEntry<N extends string>(
  dir: string,
  from: string,
  names: readonly N[],
  manifest: (files: Record<N, FileSum>) => object,
): Promise<void> {
  const tmp = `${dir}.tmp`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const files = {} as Record<N, FileSum>;
  for (const name of names) {
    const file = join(tmp, name);
    await copyFile(join(from, name), file);
    await chmod(file, 0o755);
    files[name] = { sha256: await sha256(file), size: (await stat(file)).size };
  }
  await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest(files), null, 2)}\n`);
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
}

function paths(dir: string) {
  return {
    kubeApiserver: join(dir, 'kube-apiserver'),
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    kubeScheduler: join(dir, 'kube-scheduler'),
  };
}

async function fromUserDir(dir: string, from: string, env: NodeJS.ProcessEnv): Promise<LabBinariesInfo> {
  const missing: string[] = [];
  for (const name of KUBE_BINARIES) if (!(await executable(join(dir, name)))) missing.push(name);
  if (missing.length)
    throw new KrError('LAB_BINARIES_MISSING', `${from} ${quote(dir)} lacks ${missing.join(', ')}`, {
      exit: EXIT.refused,
      details: [
        'The lab needs kube-apiserver, kube-controller-manager and kube-scheduler (and etcd there or on PATH).',
        'Leave --bin-dir and KUBEBUILDER_ASSETS unset to use binaries built by `kube-runbook-lab install`.',
      ],
    });
  const version = await binaryVersion(join(dir, 'kube-apiserver'));
  return { dir, version, ...paths(dir), etcd: await findEtcd(dir, env) };
}

/** etcd from the user's directory, else PATH (Debian's etcd-server puts it in /usr/bin). */
async function findEtcd(dir: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (dir && (await executable(join(dir, 'etcd')))) return join(dir, 'etcd');
  for (const p of (env.PATH ?? '/usr/bin:/bin').split(':').concat(['/usr/bin', '/usr/local/bin'])) {
    if (p && (await executable(join(p, 'etcd')))) return join(p, 'etcd');
  }
  return '';
}

/** `Kubernetes v1.20.2` → `1.20.2` (`args`: what prints it; kubeadm's is `version -o short`). */
export async function binaryVersion(file: string, args: string[] = ['--version']): Promise<string> {
  const r = await run(file, args, { timeoutMs: 20_000 });
  const m = /v(\d+\.\d+\.\d+[^\s]*)/.exec(r.stdout + r.stderr);
  if (!m) throw new KrError('LAB_BINARY_BROKEN', `${file} ${args.join(' ')} printed no version (exit ${r.code})`);
  return m[1]!;
}

async function executable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
