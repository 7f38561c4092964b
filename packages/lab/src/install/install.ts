import { readFile, rm } from 'node:fs/promises';
import { platform } from 'node:os';
import { join } from 'node:path';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { type Clock, realClock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { APT_PACKAGES, APT_WAIT, missingPackages } from './apt.js';
import { parseOsRelease } from './apt-sources.js';
import { findLabBinaries, parseLabVersion, routeOf } from './binaries.js';
import { goBuild } from './gobuild.js';
import { buildFromSource, cacheBinaries } from './build.js';
import { have, must } from '../host/host.js';
import type { LabBinariesInfo } from '../host/info.js';
import { withLock } from '../host/lock.js';
import { cacheDir as defaultCacheDir } from '../host/paths.js';

export interface InstallOptions {
  log: Logger;
  /** The Kubernetes release to have: a minor (1.37) or an exact patch (1.37.2); 1.37 when absent. */
  kubernetesVersion?: string;
  binDir?: string;
  cacheDir?: string;
  /** Rebuild even when the cache has binaries. */
  force?: boolean;
  signal?: AbortSignal;
  clock?: Clock;
  env?: NodeJS.ProcessEnv;
}

/** What is needed when this machine cannot be set up automatically. */
const MANUAL_STEPS = [
  'The lab needs Linux and root (it makes network namespaces, veths, an iptables chain and a cgroup).',
  'Packages: etcd (3.4 or newer, e.g. Debian etcd-server), iproute2, iptables, openssl, curl, socat.',
  'Kubernetes control-plane binaries kube-apiserver, kube-controller-manager and kube-scheduler: pass their directory',
  '  with --bin-dir DIR or KUBEBUILDER_ASSETS=DIR (etcd may sit there too), or run `kube-runbook-lab install` as root',
  '  on Debian or Ubuntu, which builds them: 1.37 and 1.34 with Go from the Go module proxy (about 10 minutes on 2',
  '  cores each), 1.20 from the distribution kubernetes source package (about 6 minutes).',
];

/**
 * Makes the lab runnable: installs missing packages with apt-get, then finds binaries (`--bin-dir`,
 * `KUBEBUILDER_ASSETS`, the cache) or builds the release asked for into the cache: 1.37 and 1.34 (and their etcd)
 * with the machine's Go from the Go module proxy, 1.20 from Debian's `kubernetes` source package.
 */
export async function installLab(o: InstallOptions): Promise<LabBinariesInfo> {
  const env = o.env ?? process.env;
  const root = o.cacheDir ?? defaultCacheDir(env);
  const release = parseLabVersion(o.kubernetesVersion);
  // one installer per release at a time (a second one finds the first one's result); releases build side by side
  return withLock(join(root, `install-1.${release.minor}.lock`), () => install(o, env, root), { timeoutMs: 3_600_000, clock: o.clock });
}

async function install(o: InstallOptions, env: NodeJS.ProcessEnv, root: string): Promise<LabBinariesInfo> {
  const release = parseLabVersion(o.kubernetesVersion);
  // apt-get runs one at a time
  await withLock(join(root, 'apt.lock'), () => ensurePackages(o), { timeoutMs: 1_800_000, clock: o.clock });
  if (!o.force) {
    const found = await findLabBinaries({ binDir: o.binDir, cacheDir: root, env, log: o.log, release: o.binDir ? undefined : release });
    if (found) {
      if (!found.etcd) throw missingEtcd();
      o.log.info(`binaries: Kubernetes ${found.version} in ${found.dir}; etcd ${found.etcd}`);
      return found;
    }
  }
  const clock = o.clock ?? realClock;
  const started = clock.now();
  if (routeOf(release.minor) === 'debian') await buildFromSource(o, root);
  else {
    const work = join(root, `build-1.${release.minor}`);
    const b = await goBuild({ log: o.log, clock, signal: o.signal, env }, root, work, release);
    await cacheBinaries(b.out, root, `Go modules: k8s.io/kubernetes v${b.version}, go.etcd.io/etcd v${b.etcdVersion}`, clock, {
      etcd: { version: b.etcdVersion },
      kubeadm: true,
      build: { downloadSeconds: b.seconds.download, buildSeconds: b.seconds.build, go: b.goVersion },
    });
    await rm(work, { recursive: true, force: true });
  }
  o.log.info(`lab install: Kubernetes 1.${release.minor} ready in ${Math.round((clock.now() - started) / 1000)}s`);
  const built = await findLabBinaries({ cacheDir: root, env, log: o.log, release });
  if (!built) throw new KrError('LAB_BUILD_FAILED', `the build finished but ${root} holds no usable binaries`);
  if (!built.etcd) throw missingEtcd();
  return built;
}

/** Whether this machine can be set up automatically (Linux, root, apt-get on Debian or Ubuntu). */
async function canAutoInstall(): Promise<{ ok: boolean; why?: string }> {
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
  await aptInstall(missing, o);
}

/** `apt-get update` and `apt-get install` of the missing packages, waiting for apt's own lock. */
async function aptInstall(missing: string[], o: { log: Logger; signal?: AbortSignal }): Promise<void> {
  o.log.info(`installing ${missing.join(' ')} with apt-get`);
  const aptEnv = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await must('LAB_APT_FAILED', 'apt-get', [...APT_WAIT, 'update'], { env: aptEnv, timeoutMs: 600_000, signal: o.signal });
  await must('LAB_APT_FAILED', 'apt-get', [...APT_WAIT, 'install', '-y', '--no-install-recommends', ...missing], {
    env: aptEnv,
    timeoutMs: 1_800_000,
    signal: o.signal,
  });
}

/**
 * Debian packages only some labs need (HAProxy for `--control-planes 3`), installed when first needed with the
 * same apt-get path and lock as `lab install`, so a fresh machine gets them and two labs never run apt at once.
 */
export async function ensureAptPackages(
  packages: string[],
  o: { log: Logger; signal?: AbortSignal; clock?: Clock; env?: NodeJS.ProcessEnv },
): Promise<void> {
  const root = defaultCacheDir(o.env ?? process.env);
  await withLock(
    join(root, 'apt.lock'),
    async () => {
      const missing = await missingPackages(packages);
      if (!missing.length) return;
      const can = await canAutoInstall();
      if (!can.ok)
        throw new KrError('LAB_INSTALL_UNSUPPORTED', `${missing.join(', ')} missing and cannot be installed here: ${can.why}`, {
          exit: EXIT.refused,
          details: [`Install the Debian package(s) ${missing.join(' ')} (or your distribution's equivalent) and try again.`],
        });
      await aptInstall(missing, o);
    },
    { timeoutMs: 1_800_000, clock: o.clock },
  );
}

function missingEtcd(): KrError {
  return new KrError('LAB_BINARIES_MISSING', 'etcd was not found (not in --bin-dir or KUBEBUILDER_ASSETS, not on PATH)', {
    exit: EXIT.refused,
    details: MANUAL_STEPS,
  });
}
