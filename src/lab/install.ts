import { mkdir, readdir, readFile, rename, rm, writeFile, copyFile, chmod, stat } from 'node:fs/promises';
import { platform } from 'node:os';
import { join } from 'node:path';
import { EXIT, KrError } from '../errors.js';
import { realClock, type Clock } from '../engine/clock.js';
import type { Logger } from '../engine/logger.js';
import { deriveSourceEntries, hasDistroSource, parseDeb822, parseOneLine, parseOsRelease, type AptEntry } from './apt-sources.js';
import { binaryVersion, findLabBinaries, KUBE_BINARIES, sha256, type BinaryManifest } from './binaries.js';
import { have, must, run } from './host.js';
import type { LabBinariesInfo } from './info.js';
import { withLock } from './lock.js';
import { cacheDir as defaultCacheDir } from './paths.js';

/** Debian packages the lab and its build need. */
export const APT_PACKAGES = [
  'etcd-server',
  'iproute2',
  'iptables',
  'nftables',
  'conntrack',
  'openssl',
  'curl',
  'ca-certificates',
  'golang-go',
  'make',
  'rsync',
  'jq',
  'dpkg-dev',
  'xz-utils',
];

export const SOURCE_LIST_FILE = '/etc/apt/sources.list.d/kube-runbook-src.sources';

export interface InstallOptions {
  log: Logger;
  binDir?: string;
  cacheDir?: string;
  /** Rebuild even when the cache has binaries. */
  force?: boolean;
  signal?: AbortSignal;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
}

/** What is needed when this machine cannot be set up automatically. */
export const MANUAL_STEPS = [
  'The lab needs Linux and root (it makes network namespaces, veths, an iptables chain and a cgroup).',
  'Packages: etcd (3.4 or newer, e.g. Debian etcd-server), iproute2, iptables, openssl, curl.',
  'Kubernetes control-plane binaries kube-apiserver, kube-controller-manager and kube-scheduler: pass their directory',
  '  with --bin-dir DIR or KUBEBUILDER_ASSETS=DIR (etcd may sit there too), or run `kube-runbook lab install` as root',
  '  on Debian or Ubuntu, which builds them from the distribution kubernetes source package (about 8 minutes on 2 cores).',
];

/**
 * Makes the lab runnable: installs missing packages with apt-get, then finds binaries (`--bin-dir`,
 * `KUBEBUILDER_ASSETS`, the cache) or builds them from Debian's `kubernetes` source package into the cache.
 */
export async function installLab(o: InstallOptions): Promise<LabBinariesInfo> {
  const env = o.env ?? process.env;
  const root = o.cacheDir ?? defaultCacheDir(env);
  // one installer at a time (apt and the build directory are shared); a second one finds the first one's result
  return withLock(join(root, 'install.lock'), () => install(o, env, root), { timeoutMs: 3_600_000, clock: o.clock });
}

async function install(o: InstallOptions, env: NodeJS.ProcessEnv, root: string): Promise<LabBinariesInfo> {
  await ensurePackages(o);
  if (!o.force) {
    const found = await findLabBinaries({ binDir: o.binDir, cacheDir: root, env, log: o.log });
    if (found) {
      if (!found.etcd) throw missingEtcd();
      o.log.info(`binaries: Kubernetes ${found.version} in ${found.dir}; etcd ${found.etcd}`);
      return found;
    }
  }
  await buildFromSource(o, root);
  const built = await findLabBinaries({ cacheDir: root, env, log: o.log });
  if (!built) throw new KrError('LAB_BUILD_FAILED', `the build finished but ${root} holds no usable binaries`);
  if (!built.etcd) throw missingEtcd();
  return built;
}

/** Whether this machine can be set up automatically (Linux, root, apt-get on Debian or Ubuntu). */
export async function canAutoInstall(): Promise<{ ok: boolean; why?: string }> {
  if (platform() !== 'linux') return { ok: false, why: `this is ${platform()}, not Linux` };
  if (process.getuid?.() !== 0) return { ok: false, why: 'not running as root' };
  if (!(await have('apt-get'))) return { ok: false, why: 'apt-get is not available' };
  const os = parseOsRelease(await readFile('/etc/os-release', 'utf8').catch(() => ''));
  if (![os.id, ...os.like].some((x) => x === 'debian' || x === 'ubuntu'))
    return { ok: false, why: `${os.id || 'this system'} is neither Debian nor Ubuntu` };
  return { ok: true };
}

async function ensurePackages(o: InstallOptions): Promise<void> {
  const can = await canAutoInstall();
  if (!can.ok) {
    const found = await findLabBinaries({ binDir: o.binDir, cacheDir: o.cacheDir, env: o.env, log: o.log }).catch(() => undefined);
    const tools = await Promise.all(['ip', 'iptables', 'openssl'].map(async (t) => ((await have(t)) ? '' : t)));
    if (found?.etcd && process.getuid?.() === 0 && !tools.some(Boolean)) return;
    throw new KrError('LAB_INSTALL_UNSUPPORTED', `cannot set up the lab automatically here: ${can.why}`, {
      exit: EXIT.refused,
      details: MANUAL_STEPS,
    });
  }
  const missing = await missingPackages(APT_PACKAGES);
  if (!missing.length) return;
  o.log.info(`installing ${missing.join(' ')} with apt-get`);
  const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await must('LAB_APT_FAILED', 'apt-get', ['update'], { env: aptEnv, timeoutMs: 600_000, signal: o.signal });
  await must('LAB_APT_FAILED', 'apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
    env: aptEnv,
    timeoutMs: 1_800_000,
    signal: o.signal,
  });
}

export async function missingPackages(names: string[]): Promise<string[]> {
  const r = await run('dpkg-query', ['-W', '-f', '${Package} ${db:Status-Abbrev}\n', ...names]);
  const installed = new Set(
    r.stdout
      .split('\n')
      .filter((l) => /^\S+ ii/.test(l))
      .map((l) => l.split(' ')[0]!.split(':')[0]!),
  );
  return names.filter((n) => !installed.has(n));
}

/** Reads every enabled apt source of the machine. */
export async function readAptSources(): Promise<AptEntry[]> {
  const entries: AptEntry[] = [];
  const list = await readFile('/etc/apt/sources.list', 'utf8').catch(() => '');
  entries.push(...parseOneLine(list, '/etc/apt/sources.list'));
  const dir = '/etc/apt/sources.list.d';
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    const text = await readFile(join(dir, name), 'utf8').catch(() => '');
    if (name.endsWith('.sources')) entries.push(...parseDeb822(text, join(dir, name)));
    else if (name.endsWith('.list')) entries.push(...parseOneLine(text, join(dir, name)));
  }
  return entries;
}

/** Adds a deb-src entry derived from the distribution's own entries when there is none; returns whether it wrote one. */
export async function ensureSourceEntry(log: Logger, signal?: AbortSignal): Promise<boolean> {
  const os = parseOsRelease(await readFile('/etc/os-release', 'utf8'));
  if (!os.codename) throw new KrError('LAB_APT_SOURCES', '/etc/os-release names no VERSION_CODENAME');
  const entries = await readAptSources();
  if (hasDistroSource(entries, os.codename)) return false;
  const text = deriveSourceEntries(entries, os.codename);
  if (!text)
    throw new KrError('LAB_APT_SOURCES', `no apt entry of ${os.codename} itself to derive a deb-src entry from`, {
      details: ['Add a deb-src line for your distribution (same mirror as its deb line) and run `apt-get update`.'],
    });
  await writeFile(SOURCE_LIST_FILE, text, { mode: 0o644 });
  log.info(`added ${SOURCE_LIST_FILE} (deb-src of this machine's ${os.codename} sources)`);
  await must('LAB_APT_FAILED', 'apt-get', ['update'], { timeoutMs: 600_000, signal });
  return true;
}

async function buildFromSource(o: InstallOptions, root: string): Promise<void> {
  const clock = o.clock ?? realClock;
  const log = o.log;
  await ensureSourceEntry(log, o.signal);
  const work = join(root, 'build');
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  log.info('downloading the kubernetes source package (apt-get source)');
  await must('LAB_SOURCE_FAILED', 'apt-get', ['source', '--download-only', 'kubernetes'], {
    cwd: work,
    timeoutMs: 900_000,
    signal: o.signal,
  });
  const dsc = (await readdir(work)).find((n) => n.endsWith('.dsc'));
  if (!dsc) throw new KrError('LAB_SOURCE_FAILED', `apt-get source left no .dsc file in ${work}`);
  const sourceVersion = /^Version:\s*(\S+)/m.exec(await readFile(join(work, dsc), 'utf8'))?.[1] ?? 'unknown';
  await must('LAB_SOURCE_FAILED', 'dpkg-source', ['-x', dsc, 'src'], { cwd: work, timeoutMs: 600_000, signal: o.signal });
  const src = join(work, 'src');
  await mkdir(join(src, '.go', 'src', 'k8s.io'), { recursive: true });
  await must('LAB_SOURCE_FAILED', 'ln', ['-sfn', '../../..', join(src, '.go', 'src', 'k8s.io', 'kubernetes')]);

  const started = clock.now();
  let phase = 'preparing';
  let lastLines: string[] = [];
  log.info(`building ${KUBE_BINARIES.join(', ')} from kubernetes ${sourceVersion} (about 8 minutes on 2 cores)`);
  const tick = every(clock, 15_000, () => log.info(`build: ${Math.round((clock.now() - started) / 1000)}s, ${phase}`));
  let r;
  try {
    r = await run('make', [`WHAT=${KUBE_BINARIES.map((b) => `cmd/${b}`).join(' ')}`], {
      cwd: src,
      env: {
        ...(o.env ?? process.env),
        GOPATH: join(src, '.go'),
        CGO_ENABLED: '0',
        GO111MODULE: 'off',
        GOFLAGS: '',
        PATH: `/usr/lib/go/bin:${process.env.PATH ?? '/usr/bin:/bin'}`,
      },
      timeoutMs: 3_600_000,
      signal: o.signal,
      onLine: (line) => {
        lastLines = [...lastLines.slice(-19), line];
        const m = /^\+\+\+ \[[^\]]*\] (.*)$/.exec(line);
        if (m) {
          phase = m[1]!.replace(/:$/, '').toLowerCase();
          log.info(`build: ${Math.round((clock.now() - started) / 1000)}s, ${phase}`);
        }
      },
    });
  } finally {
    tick();
  }
  if (r.code !== 0)
    throw new KrError('LAB_BUILD_FAILED', `make failed (exit ${r.code}) in ${src}`, { details: lastLines.slice(-12) });
  log.info(`build finished in ${Math.round((clock.now() - started) / 1000)}s`);
  await cacheBinaries(join(src, '_output', 'bin'), root, `Debian kubernetes ${sourceVersion}`, clock);
  await rm(work, { recursive: true, force: true });
}

/** Copies built binaries into `<root>/kubernetes-<version>/` with a manifest of checksums (atomically). */
export async function cacheBinaries(fromDir: string, root: string, source: string, clock: Clock = realClock): Promise<string> {
  const version = await binaryVersion(join(fromDir, 'kube-apiserver'));
  const final = join(root, `kubernetes-${version}`);
  const tmp = `${final}.tmp`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const files = {} as BinaryManifest['files'];
  for (const name of KUBE_BINARIES) {
    await copyFile(join(fromDir, name), join(tmp, name));
    await chmod(join(tmp, name), 0o755);
    files[name] = { sha256: await sha256(join(tmp, name)), size: (await stat(join(tmp, name))).size };
  }
  const manifest: BinaryManifest = { kind: 'kube-runbook/lab-binaries', version, source, builtAt: new Date(clock.now()).toISOString(), files };
  await writeFile(join(tmp, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await rm(final, { recursive: true, force: true });
  await rename(tmp, final);
  return final;
}

/** Calls `fn` every `ms` until the returned function is called. */
function every(clock: Clock, ms: number, fn: () => void): () => void {
  let cancel = () => {};
  const arm = () => {
    cancel = clock.setTimer(ms, () => {
      fn();
      arm();
    });
  };
  arm();
  return () => cancel();
}

function missingEtcd(): KrError {
  return new KrError('LAB_BINARIES_MISSING', 'etcd was not found (not in --bin-dir or KUBEBUILDER_ASSETS, not on PATH)', {
    exit: EXIT.refused,
    details: MANUAL_STEPS,
  });
}
