import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { ensureSourceEntry } from './apt.js';
import { binaryVersion, KUBE_BINARIES, writeCacheEntry, type BinaryManifest } from './binaries.js';
import { must, run } from '../host/host.js';

export interface BuildOptions {
  log: Logger;
  clock?: Clock;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

/**
 * Builds kube-apiserver, kube-controller-manager and kube-scheduler from the distribution's `kubernetes` source
 * package (`apt-get source`, the source's own `make` in GOPATH mode with the distribution's Go) into the cache.
 */
export async function buildFromSource(o: BuildOptions, root: string): Promise<void> {
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
  await mkdir(join(src, '.go', 'home'), { recursive: true });
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
      env: debianGoEnv(src, o.env ?? process.env),
      timeoutMs: 3_600_000,
      signal: o.signal,
      onLine: (line) => {
        lastLines = [...lastLines.slice(-19), line];
        const m = /^\+\+\+ \[[^\]]*\] (.*)$/.exec(line);
        const next = m?.[1]?.replace(/:$/, '').toLowerCase();
        if (next && next !== phase) {
          phase = next;
          log.info(`build: ${Math.round((clock.now() - started) / 1000)}s, ${phase}`);
        }
      },
    });
  } finally {
    tick();
  }
  if (r.code !== 0) throw new KrError('LAB_BUILD_FAILED', `make failed (exit ${r.code}) in ${src}`, { details: lastLines.slice(-12) });
  log.info(`build finished in ${Math.round((clock.now() - started) / 1000)}s`);
  await cacheBinaries(join(src, '_output', 'bin'), root, `Debian kubernetes ${sourceVersion}`, clock);
  await rm(work, { recursive: true, force: true });
}

/** Copies built binaries (and etcd, when built beside them) into `<root>/kubernetes-<version>/` with a manifest of checksums (atomically). */
export async function cacheBinaries(
  fromDir: string,
  root: string,
  source: string,
  clock: Clock = realClock,
  extra: Pick<BinaryManifest, 'build' | 'etcd'> & { kubeadm?: boolean } = {},
): Promise<string> {
  const version = await binaryVersion(join(fromDir, 'kube-apiserver'));
  const final = join(root, `kubernetes-${version}`);
  const names = [...KUBE_BINARIES, ...(extra.etcd ? (['etcd', 'etcdctl'] as const) : []), ...(extra.kubeadm ? (['kubeadm'] as const) : [])];
  await writeCacheEntry(final, fromDir, names, (files): BinaryManifest => ({
    kind: 'kube-runbook/lab-binaries',
    version,
    source,
    builtAt: new Date(clock.now()).toISOString(),
    ...(extra.build ? { build: extra.build } : {}),
    ...(extra.etcd ? { etcd: extra.etcd } : {}),
    files,
  }));
  return final;
}

/**
 * The environment of the Debian build: Debian's Go (/usr/lib/go) first on PATH, and none of this machine's GO*
 * variables (a newer Go's GOROOT, GOTOOLCHAIN, GOFLAGS or go env file would break Go 1.19 or switch toolchains).
 * HOME is the build's own directory, and BASH_ENV and ENV are dropped: the build's bash scripts run with a socket as
 * stdin (Node's pipes), and bash then reads ~/.bashrc, whose PATH may put a newer Go first ("compile: version
 * go1.19.8 does not match go tool version go1.26.8").
 */
export function debianGoEnv(src: string, base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base))
    if (!k.startsWith('GO') && !k.startsWith('CGO_') && k !== 'BASH_ENV' && k !== 'ENV') env[k] = v;
  return {
    ...env,
    HOME: join(src, '.go', 'home'),
    GOENV: 'off',
    GOROOT: '/usr/lib/go',
    GOPATH: join(src, '.go'),
    GOCACHE: join(src, '.go', 'cache'),
    CGO_ENABLED: '0',
    GO111MODULE: 'off',
    GOFLAGS: '',
    GOTOOLCHAIN: 'local',
    PATH: `/usr/lib/go/bin:${base.PATH ?? '/usr/bin:/bin'}`,
  };
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
