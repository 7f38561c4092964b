import { chmod, copyFile, mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { sha256 } from './binaries.js';
import { must, mustSh, run } from '../host/host.js';
import { withLock } from '../host/lock.js';

/**
 * Images of the real nodes, built here as OCI archives (an OCI image layout in a tar), without a registry or a
 * Docker engine, and imported into each node's containerd (`ctr images import`):
 * - the pause image, from the release's own `build/pause/linux/pause.c` (in the `k8s.io/kubernetes` module the
 *   lab builds from) compiled statically with the machine's C compiler, tagged as that release tags it;
 * - a workload image holding Debian's busybox-static (a shell, httpd, sleep and the other applets).
 *
 * They are put together with umoci (Debian's `umoci`): the Open Container Initiative's own daemonless tool that
 * writes an OCI image layout directly (init, new, unpack, repack, config), runs as one short command each, and
 * needs neither a daemon, a registry, storage configuration nor user namespaces, unlike buildah or a Dockerfile.
 * Names are under `localhost/`, which no registry serves: a pull is never attempted (the pods' imagePullPolicy
 * is IfNotPresent and the images are present), and would fail at once if it were.
 */
export const IMAGE_REPO = 'localhost/kube-runbook';
export const WORKLOAD_IMAGE = `${IMAGE_REPO}/busybox:lab`;

export interface LabImage {
  /** The reference pods and containerd use, e.g. `localhost/kube-runbook/pause:3.10.2`. */
  ref: string;
  /** The OCI archive `ctr images import` reads. */
  archive: string;
}

export interface LabImages {
  pause: LabImage;
  workload: LabImage;
}

const ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

/** The pause image's tag in a release's `build/pause/Makefile` (`TAG ?= 3.10.2`). */
export function pauseTagOf(makefile: string): string | undefined {
  return /^TAG\s*\?=\s*(\S+)/m.exec(makefile)?.[1];
}

/**
 * Both images, from the cache when their inputs (the pause source, busybox) did not change; `kubeDir` is the
 * `k8s.io/kubernetes` module's directory. Call under the install lock.
 */
export async function ensureImages(o: { log: Logger; signal?: AbortSignal }, root: string, kubeDir: string): Promise<LabImages> {
  const dir = join(root, 'images');
  await mkdir(dir, { recursive: true });
  // releases install side by side (each under its own lock) and share the workload image
  return withLock(join(dir, 'images.lock'), () => build(o, dir, kubeDir), { timeoutMs: 600_000 });
}

async function build(o: { log: Logger; signal?: AbortSignal }, dir: string, kubeDir: string): Promise<LabImages> {
  const pauseSrc = join(kubeDir, 'build', 'pause', 'linux', 'pause.c');
  const tag = pauseTagOf(await readFile(join(kubeDir, 'build', 'pause', 'Makefile'), 'utf8').catch(() => '')) ?? '3.10';
  const busybox = (await run('/bin/sh', ['-c', 'command -v busybox'])).stdout.trim() || '/bin/busybox';
  const pause = await cachedImage(o, dir, `pause-${tag}`, `${IMAGE_REPO}/pause:${tag}`, await sha256(pauseSrc), async (rootfs) => {
    await must('LAB_IMAGE_FAILED', 'cc', ['-Os', '-Wall', '-static', `-DVERSION=v${tag}`, '-o', join(rootfs, 'pause'), pauseSrc], {
      timeoutMs: 120_000,
    });
    return { entrypoint: ['/pause'], user: '65535:65535' };
  });
  const workload = await cachedImage(o, dir, 'busybox', WORKLOAD_IMAGE, await sha256(busybox), async (rootfs) => {
    await mkdir(join(rootfs, 'bin'), { recursive: true });
    await copyFile(busybox, join(rootfs, 'bin', 'busybox'));
    await chmod(join(rootfs, 'bin', 'busybox'), 0o755);
    const applets = (await must('LAB_IMAGE_FAILED', busybox, ['--list']))
      .split('\n')
      .filter((a) => /^[\w.[-]+$/.test(a) && a !== 'busybox');
    for (const a of applets) await symlink('busybox', join(rootfs, 'bin', a)).catch(() => {});
    for (const d of ['etc', 'tmp', 'root', 'www']) await mkdir(join(rootfs, d), { recursive: true });
    await chmod(join(rootfs, 'tmp'), 0o1777);
    await writeFile(join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
    await writeFile(join(rootfs, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
    return { cmd: ['sh'], env: ['PATH=/bin'] };
  });
  return { pause, workload };
}

/** What an image's configuration says besides its files. */
export interface ImageConfig {
  entrypoint?: string[];
  cmd?: string[];
  user?: string;
  env?: string[];
}

/**
 * One image: reused when `<name>.json` records the same reference and input; else built with umoci, `fill` putting
 * its files into the root filesystem (as root: owners are kept) and saying its configuration.
 */
export async function cachedImage(
  o: { log: Logger; signal?: AbortSignal },
  dir: string,
  name: string,
  ref: string,
  input: string,
  fill: (rootfs: string) => Promise<ImageConfig>,
): Promise<LabImage> {
  const archive = join(dir, `${name}.oci.tar`);
  const stamp = join(dir, `${name}.json`);
  const want = JSON.stringify({ ref, input, arch: ARCH[process.arch] ?? process.arch });
  const had = await readFile(stamp, 'utf8').catch(() => '');
  if (had.trim() === want && (await sha256(archive).catch(() => ''))) return { ref, archive };
  o.log.info(`image ${ref}: building an OCI archive with umoci`);
  const work = join(dir, `build-${name}`);
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const layout = join(work, 'oci');
  const bundle = join(work, 'bundle');
  const tag = ref.slice(ref.lastIndexOf(':') + 1);
  const img = `${layout}:${tag}`;
  const umoci = (args: string[]) => must('LAB_IMAGE_FAILED', 'umoci', args, { timeoutMs: 300_000, signal: o.signal });
  await umoci(['init', '--layout', layout]);
  await umoci(['new', '--image', img]);
  await umoci(['unpack', '--image', img, bundle]);
  const cfg = await fill(join(bundle, 'rootfs'));
  await umoci(['repack', '--image', img, bundle]);
  await umoci([
    'config',
    '--image',
    img,
    '--os',
    'linux',
    '--architecture',
    ARCH[process.arch] ?? process.arch,
    '--author',
    'kube-runbook lab',
    ...(cfg.entrypoint ?? []).flatMap((e) => ['--config.entrypoint', e]),
    ...(cfg.cmd ?? []).flatMap((c) => ['--config.cmd', c]),
    ...(cfg.user ? ['--config.user', cfg.user] : []),
    ...(cfg.env ?? []).flatMap((e) => ['--config.env', e]),
  ]);
  await umoci(['gc', '--layout', layout]);
  await mustSh(
    'LAB_IMAGE_FAILED',
    `archiving ${ref}`,
    `tar -C ${shq(layout)} --sort=name --owner=0 --group=0 --numeric-owner -cf ${shq(`${archive}.tmp`)} .\n`,
  );
  await rename(`${archive}.tmp`, archive);
  await writeFile(stamp, `${want}\n`);
  await rm(work, { recursive: true, force: true });
  if (!(await sha256(archive).catch(() => ''))) throw new KrError('LAB_IMAGE_FAILED', `${archive} was not written`);
  return { ref, archive };
}
