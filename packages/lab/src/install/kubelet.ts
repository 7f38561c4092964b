import { access, chmod, constants, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { binaryVersion, sha256, type BinaryManifest, type ReleaseCommand } from './binaries.js';
import { buildModuleText, download, findGo, goEnv, goRunner, kubeBuildFlags } from './gobuild.js';
import type { LabBinariesInfo } from '../host/info.js';

/**
 * The kubelet of the lab's release, for real nodes: see ensureReleaseCommand. Built on first use only: labs of
 * simulated nodes never need it.
 */
export const ensureKubelet = (o: CommandBuildOptions, root: string, bin: LabBinariesInfo): Promise<string> =>
  ensureReleaseCommand(o, root, bin, 'kubelet');

/**
 * kubeadm of the lab's release (`lab up --kubeadm`): built with the control plane by `lab install`, and here once
 * into a cache made before it was (see ensureReleaseCommand).
 */
export const ensureKubeadm = (o: CommandBuildOptions, root: string, bin: LabBinariesInfo): Promise<string> =>
  ensureReleaseCommand(o, root, bin, 'kubeadm');

export interface CommandBuildOptions {
  log: Logger;
  clock?: Clock;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

/**
 * A command of the lab's release (`cmd/<name>` of `k8s.io/kubernetes`), built from the same build module as the
 * control plane (the release, its staging modules replaced by the matching v0.x.y) into the release's cache
 * directory beside kube-apiserver and added to its manifest; nothing is done when the manifest already lists it with
 * its checksum. Most of its packages are in the Go build cache after the control plane's build. With `--bin-dir` or
 * KUBEBUILDER_ASSETS the user's command must sit beside the other binaries.
 */
async function ensureReleaseCommand(o: CommandBuildOptions, root: string, bin: LabBinariesInfo, name: ReleaseCommand): Promise<string> {
  const file = join(bin.dir, name);
  const manifestFile = join(bin.dir, 'manifest.json');
  const manifest = await readFile(manifestFile, 'utf8')
    .then((t) => JSON.parse(t) as BinaryManifest)
    .catch(() => undefined);
  if (!manifest) {
    if (
      await access(file, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return checkVersion(file, bin.version, name);
    throw new KrError(
      'LAB_BINARIES_MISSING',
      `${USED_FOR[name]} need${name === 'kubeadm' ? 's' : ''} ${name} in ${bin.dir} (the directory of the lab's kube-apiserver)`,
      {
        exit: EXIT.invalid,
      },
    );
  }
  const want = manifest.files[name];
  if (want && (await sha256(file).catch(() => '')) === want.sha256) return file;
  const clock = o.clock ?? realClock;
  const env = goEnv(root, o.env);
  const version = bin.version;
  const first = await findGo('1.21', o.env);
  const kube = await download(first.go, `k8s.io/kubernetes@v${version}`, env, o.signal);
  const built = buildModuleText(await readFile(kube.GoMod, 'utf8'), version);
  const { go } = await findGo(built.goVersion, o.env);
  const work = join(root, `build-${name}-${version}`);
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  await writeFile(join(work, 'go.mod'), built.text);
  const goRun = goRunner(go, { env, signal: o.signal, label: `${name} ${version}` });
  await goRun(work, ['list', '-deps', `k8s.io/kubernetes/cmd/${name}`], 'downloading its modules');
  o.log.info(`${name} ${version}: building it for ${USED_FOR[name]} (a few minutes on 2 cores; once)`);
  const t0 = clock.now();
  await goRun(work, ['build', ...kubeBuildFlags(version), '-o', join(work, name), `k8s.io/kubernetes/cmd/${name}`], 'building');
  const seconds = Math.round((clock.now() - t0) / 1000);
  o.log.info(`${name} ${version}: built in ${seconds}s`);
  await copyFile(join(work, name), `${file}.tmp`);
  await chmod(`${file}.tmp`, 0o755);
  await rename(`${file}.tmp`, file);
  // the manifest read again: another command may have been added since
  const now = JSON.parse(await readFile(manifestFile, 'utf8')) as BinaryManifest;
  const next: BinaryManifest = {
    ...now,
    [name]: { buildSeconds: seconds },
    files: { ...now.files, [name]: { sha256: await sha256(file), size: (await stat(file)).size } },
  };
  await writeFile(`${manifestFile}.tmp`, `${JSON.stringify(next, null, 2)}\n`);
  await rename(`${manifestFile}.tmp`, manifestFile);
  await rm(work, { recursive: true, force: true });
  return checkVersion(file, version, name);
}

const USED_FOR: Record<ReleaseCommand, string> = { kubelet: 'real nodes', kubeadm: 'lab up --kubeadm' };

async function checkVersion(file: string, want: string, name: ReleaseCommand): Promise<string> {
  const got = await binaryVersion(file, name === 'kubeadm' ? ['version', '-o', 'short'] : ['--version']);
  if (got !== want)
    throw new KrError('LAB_BINARIES_MISSING', `${file} is version ${got}, not ${want} (the lab's apiserver)`, { exit: EXIT.invalid });
  return file;
}
