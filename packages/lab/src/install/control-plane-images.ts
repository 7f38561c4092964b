import { chmod, copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import { sha256 } from './binaries.js';
import { cachedImage, IMAGE_REPO, type LabImage } from './images.js';
import type { LabBinariesInfo } from '../host/info.js';
import { withLock } from '../host/lock.js';

/** The control-plane components kubeadm runs as static pods, by their manifest and container name. */
export const CONTROL_PLANE_COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export type ControlPlaneComponent = (typeof CONTROL_PLANE_COMPONENTS)[number];
export type ControlPlaneImages = Record<ControlPlaneComponent, LabImage>;

/** Where a component's binary sits in its image (as in the release's own images: `/usr/local/bin/<name>`). */
export const binaryInImage = (c: ControlPlaneComponent): string => `/usr/local/bin/${c}`;

/**
 * Images of the static-pod control plane (`lab up --static-pods`): one per component, holding the lab's own
 * binary of the release, named as the release names its images but under `localhost/kube-runbook/`
 * (`localhost/kube-runbook/kube-apiserver:v1.37.2`; etcd is tagged with the release too, since the lab builds
 * it for that release). Built with umoci like the real nodes' images (see images.ts), from the cache when the
 * binaries did not change. The binaries are static, so the image needs nothing else.
 */
export async function ensureControlPlaneImages(
  o: { log: Logger; signal?: AbortSignal },
  root: string,
  bin: LabBinariesInfo,
): Promise<ControlPlaneImages> {
  const files: Record<ControlPlaneComponent, string | undefined> = {
    etcd: bin.etcd,
    'kube-apiserver': bin.kubeApiserver,
    'kube-controller-manager': bin.kubeControllerManager,
    'kube-scheduler': bin.kubeScheduler,
  };
  const dir = join(root, 'images');
  await mkdir(dir, { recursive: true });
  return withLock(
    join(dir, 'images.lock'),
    async () => {
      const out: Partial<ControlPlaneImages> = {};
      for (const c of CONTROL_PLANE_COMPONENTS) {
        const file = files[c];
        if (!file)
          throw new KrError(
            'LAB_BINARIES_MISSING',
            `--static-pods needs ${c} of Kubernetes ${bin.version}; run \`kube-runbook-lab install\``,
            { exit: EXIT.refused },
          );
        out[c] = await cachedImage(
          o,
          dir,
          `${c}-v${bin.version}`,
          `${IMAGE_REPO}/${c}:v${bin.version}`,
          await sha256(file),
          async (rootfs) => {
            const target = join(rootfs, binaryInImage(c));
            await mkdir(join(rootfs, 'usr', 'local', 'bin'), { recursive: true });
            for (const d of ['tmp', 'var/lib', 'etc']) await mkdir(join(rootfs, d), { recursive: true });
            await chmod(join(rootfs, 'tmp'), 0o1777);
            await copyFile(file, target);
            await chmod(target, 0o755);
            return { env: ['PATH=/usr/local/bin:/usr/bin:/bin'] };
          },
        );
      }
      return out as ControlPlaneImages;
    },
    { timeoutMs: 600_000 },
  );
}
