import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { sha256, writeCacheEntry } from './binaries.js';
import { download, findGo, goEnv, goRunner } from './gobuild.js';

/**
 * The CRI runtime of the lab's real nodes: containerd 2.4, built with this machine's Go from the Go module proxy
 * (`github.com/containerd/containerd/v2`, required by a small build module under the cache), cached in
 * `<cache>/containerd-<version>/` with a manifest of checksums.
 *
 * Why 2.4: Debian 12's containerd is 1.6, which the kubelet of 1.37 (and 1.34) refuses (it wants containerd 2.x,
 * whose CRI v1 API reports the runtime features these kubelets ask for); 2.4 is the newest minor release the Go
 * module proxy serves, so the newest kubelet the lab builds gets the newest runtime. It runs with Debian's runc (1.1) and
 * CNI plugins (1.1), which speak the runtime spec and CNI 1.0 it needs. Built without cgo (the btrfs, devmapper
 * and ZFS snapshotters are left out: the lab uses overlayfs), so it needs no C toolchain.
 */
const CONTAINERD_VERSION = '2.4.2';
const CONTAINERD_MODULE = 'github.com/containerd/containerd/v2';
const CONTAINERD_COMMANDS = ['containerd', 'ctr', 'containerd-shim-runc-v2'] as const;

export interface ContainerdBinaries {
  dir: string;
  version: string;
  containerd: string;
  ctr: string;
  shim: string;
}

interface ContainerdManifest {
  kind: 'kube-runbook/containerd';
  version: string;
  builtAt: string;
  build: { seconds: number; go: string };
  files: Record<string, { sha256: string; size: number }>;
}

/** Undefined unless every file of the manifest is there with its checksum. */
async function cached(dir: string): Promise<ContainerdBinaries | undefined> {
  let m: ContainerdManifest;
  try {
    m = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as ContainerdManifest;
  } catch {
    return undefined;
  }
  if (m.kind !== 'kube-runbook/containerd') return undefined;
  for (const name of CONTAINERD_COMMANDS) {
    const want = m.files[name];
    if (!want || (await sha256(join(dir, name)).catch(() => '')) !== want.sha256) return undefined;
  }
  return pathsOf(dir, m.version);
}

const pathsOf = (dir: string, version: string): ContainerdBinaries => ({
  dir,
  version,
  containerd: join(dir, 'containerd'),
  ctr: join(dir, 'ctr'),
  shim: join(dir, 'containerd-shim-runc-v2'),
});

/** containerd from the cache, built first when missing (about 2 to 4 minutes on 2 cores). Call under the install lock. */
export async function ensureContainerd(
  o: { log: Logger; clock?: Clock; signal?: AbortSignal; env?: NodeJS.ProcessEnv },
  root: string,
): Promise<ContainerdBinaries> {
  const final = join(root, `containerd-${CONTAINERD_VERSION}`);
  const have = await cached(final);
  if (have) return have;
  const clock = o.clock ?? realClock;
  const env = goEnv(root, o.env);
  const work = join(root, 'build-containerd');
  const out = join(work, 'out');
  await rm(work, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  const first = await findGo('1.21', o.env);
  o.log.info(`containerd ${CONTAINERD_VERSION}: downloading ${CONTAINERD_MODULE} from the Go module proxy`);
  const mod = await download(first.go, `${CONTAINERD_MODULE}@v${CONTAINERD_VERSION}`, env, o.signal);
  const goLine = /^go\s+(\S+)/m.exec(await readFile(mod.GoMod, 'utf8'))?.[1] ?? '1.24';
  const { go, version: goVersion } = await findGo(goLine, o.env);
  await writeFile(
    join(work, 'go.mod'),
    `module kube-runbook-lab-containerd\n\ngo ${goLine}\n\nrequire ${CONTAINERD_MODULE} v${CONTAINERD_VERSION}\n`,
  );
  const pkgs = CONTAINERD_COMMANDS.map((c) => `${CONTAINERD_MODULE}/cmd/${c}`);
  const goRun = goRunner(go, { env, signal: o.signal, label: `containerd ${CONTAINERD_VERSION}` });
  await goRun(work, ['list', '-deps', ...pkgs], 'downloading its modules');
  o.log.info(`containerd ${CONTAINERD_VERSION}: building ${CONTAINERD_COMMANDS.join(', ')} with Go ${goVersion}`);
  const t0 = clock.now();
  const ldflags = `-s -w -X ${CONTAINERD_MODULE}/version.Version=v${CONTAINERD_VERSION}`;
  await goRun(
    work,
    ['build', '-trimpath', '-tags=no_btrfs,no_devmapper,no_zfs', `-ldflags=${ldflags}`, '-o', `${out}/`, ...pkgs],
    'building',
  );
  const seconds = Math.round((clock.now() - t0) / 1000);
  o.log.info(`containerd ${CONTAINERD_VERSION}: built in ${seconds}s`);
  await writeCacheEntry(final, out, CONTAINERD_COMMANDS, (files): ContainerdManifest => ({
    kind: 'kube-runbook/containerd',
    version: CONTAINERD_VERSION,
    builtAt: new Date(clock.now()).toISOString(),
    build: { seconds, go: goVersion },
    files,
  }));
  await rm(work, { recursive: true, force: true });
  return pathsOf(final, CONTAINERD_VERSION);
}
