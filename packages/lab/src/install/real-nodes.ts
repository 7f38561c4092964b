import { access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { ensureContainerd, type ContainerdBinaries } from './containerd.js';
import { routeOf } from './binaries.js';
import { download, findGo, goEnv } from './gobuild.js';
import { ensureImages, type LabImages } from './images.js';
import { ensureRuntimeImages, type BuiltImage } from './runtime-images.js';
import { ensureAptPackages } from './install.js';
import { ensureKubeadm, ensureKubelet } from './kubelet.js';
import type { LabBinariesInfo } from '../host/info.js';
import { withLock } from '../host/lock.js';
import { cacheDir as defaultCacheDir } from '../host/paths.js';

/**
 * Debian packages real nodes need: runc (the OCI runtime containerd's shim runs), the CNI plugins (bridge,
 * host-local, loopback), umoci (builds the images), busybox-static (the workload image's content), and a C
 * compiler with a static libc (the release's pause.c).
 */
const REAL_NODE_PACKAGES = ['runc', 'containernetworking-plugins', 'umoci', 'busybox-static', 'gcc', 'libc6-dev', 'util-linux'];

/** Where Debian's containernetworking-plugins puts the plugins. */
const CNI_BIN_DIRS = ['/usr/lib/cni', '/opt/cni/bin'];

export interface RealNodeBinaries {
  kubelet: string;
  /** The release's kubeadm (`lab up --kubeadm`). */
  kubeadm?: string;
  containerd: ContainerdBinaries;
  runc: string;
  cniBinDir: string;
  images: LabImages;
  /** The node agent's image (deploy/agent/Dockerfile), which agent pods on real nodes run. */
  agentImage: BuiltImage;
  /** The executor's image (Dockerfile), which the Job of `kube-runbook manifests` runs. */
  executorImage: BuiltImage;
}

/**
 * Everything a real node runs, installed or built once into the cache: the Debian packages, the kubelet of the
 * lab's release, containerd and the images. Holds the release's install lock (a second caller waits and then
 * finds the first one's result).
 */
export async function ensureRealNodeBinaries(
  o: { log: Logger; clock?: Clock; signal?: AbortSignal; env?: NodeJS.ProcessEnv; kubeadm?: boolean },
  bin: LabBinariesInfo,
): Promise<RealNodeBinaries> {
  if (routeOf(Number(bin.version.split('.')[1])) === 'debian')
    throw new KrError(
      'LAB_REAL_NODES_UNSUPPORTED',
      `real nodes run on Kubernetes 1.37 and 1.34 (built from the Go module proxy); this lab runs ${bin.version}`,
      {
        exit: EXIT.invalid,
        details: ['Use --kubernetes-version 1.37 (the default) or 1.34 with --real-nodes, or simulated nodes (--nodes) on 1.20.'],
      },
    );
  const env = o.env ?? process.env;
  const root = defaultCacheDir(env);
  await ensureAptPackages(REAL_NODE_PACKAGES, o);
  const minor = bin.version.split('.')[1];
  return withLock(
    join(root, `install-1.${minor}.lock`),
    async () => {
      const kubelet = await ensureKubelet(o, root, bin);
      const kubeadm = o.kubeadm ? await ensureKubeadm(o, root, bin) : undefined;
      const containerd = env.KUBE_RUNBOOK_CONTAINERD_DIR
        ? await ownContainerd(env.KUBE_RUNBOOK_CONTAINERD_DIR)
        : await ensureContainerd(o, root);
      const first = await findGo('1.21', o.env);
      const kube = await download(first.go, `k8s.io/kubernetes@v${bin.version}`, goEnv(root, o.env), o.signal);
      const images = await ensureImages(o, root, kube.Dir);
      const built = await ensureRuntimeImages(o, join(root, 'images'), ['executor', 'agent']);
      const image = (name: BuiltImage['recipe']['name']) => built.find((b) => b.recipe.name === name)!;
      return {
        kubelet,
        ...(kubeadm ? { kubeadm } : {}),
        containerd,
        runc: await findRunc(),
        cniBinDir: await findCniBinDir(),
        images,
        agentImage: image('agent'),
        executorImage: image('executor'),
      };
    },
    { timeoutMs: 3_600_000, clock: o.clock },
  );
}

/** `KUBE_RUNBOOK_CONTAINERD_DIR`: a containerd of the user's own (2.x), with ctr and containerd-shim-runc-v2 beside it. */
async function ownContainerd(dir: string): Promise<ContainerdBinaries> {
  const b = {
    dir,
    version: 'KUBE_RUNBOOK_CONTAINERD_DIR',
    containerd: join(dir, 'containerd'),
    ctr: join(dir, 'ctr'),
    shim: join(dir, 'containerd-shim-runc-v2'),
  };
  for (const f of [b.containerd, b.ctr, b.shim])
    if (!(await executable(f)))
      throw new KrError('LAB_REAL_NODE_MISSING', `KUBE_RUNBOOK_CONTAINERD_DIR=${dir} has no executable ${f.slice(dir.length + 1)}`, {
        exit: EXIT.invalid,
      });
  return b;
}

const executable = (f: string) =>
  access(f, constants.X_OK).then(
    () => true,
    () => false,
  );

async function findRunc(): Promise<string> {
  for (const f of ['/usr/sbin/runc', '/usr/bin/runc', '/usr/local/sbin/runc', '/usr/local/bin/runc']) if (await executable(f)) return f;
  throw new KrError('LAB_REAL_NODE_MISSING', 'real nodes need runc, and it is not installed (Debian package runc)', { exit: EXIT.invalid });
}

async function findCniBinDir(): Promise<string> {
  for (const d of CNI_BIN_DIRS)
    if ((await executable(join(d, 'bridge'))) && (await executable(join(d, 'host-local'))) && (await executable(join(d, 'loopback'))))
      return d;
  throw new KrError(
    'LAB_REAL_NODE_MISSING',
    `real nodes need the CNI plugins bridge, host-local and loopback in ${CNI_BIN_DIRS.join(' or ')} (Debian package containernetworking-plugins)`,
    {
      exit: EXIT.invalid,
    },
  );
}
