import { access, chmod, constants, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { realClock, type Clock } from 'kube-runbook/internal/core/clock.js';
import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { binaryVersion, sha256, type BinaryManifest } from './binaries.js';
import { buildModuleText, download, findGo, goEnv, kubeBuildFlags } from './gobuild.js';
import { must } from '../host/host.js';
import type { LabBinariesInfo } from '../host/info.js';

/**
 * The kubelet of the lab's release, for real nodes: built from the same build module as the control plane
 * (`k8s.io/kubernetes` at the release, its staging modules replaced by the matching v0.x.y) into the release's
 * cache directory beside kube-apiserver, and added to its manifest. Built on first use only: labs of simulated
 * nodes never need it. Most of its packages are in the Go build cache after the control plane's build.
 */
export async function ensureKubelet(
  o: { log: Logger; clock?: Clock; signal?: AbortSignal; env?: NodeJS.ProcessEnv },
  root: string,
  bin: LabBinariesInfo,
): Promise<string> {
  const file = join(bin.dir, 'kubelet');
  const manifestFile = join(bin.dir, 'manifest.json');
  const manifest = await readFile(manifestFile, 'utf8')
    .then((t) => JSON.parse(t) as BinaryManifest)
    .catch(() => undefined);
  if (!manifest) {
    // --bin-dir / KUBEBUILDER_ASSETS: the user's kubelet must sit beside the other binaries
    if (
      await access(file, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return checkVersion(file, bin.version);
    throw new KrError('LAB_BINARIES_MISSING', `real nodes need a kubelet in ${bin.dir} (the directory of the lab's kube-apiserver)`, {
      exit: EXIT.invalid,
    });
  }
  if (manifest.files.kubelet && (await sha256(file).catch(() => '')) === manifest.files.kubelet.sha256) return file;
  const clock = o.clock ?? realClock;
  const env = goEnv(root, o.env);
  const version = bin.version;
  const first = await findGo('1.21', o.env);
  const kube = await download(first.go, `k8s.io/kubernetes@v${version}`, env, o.signal);
  const built = buildModuleText(await readFile(kube.GoMod, 'utf8'), version);
  const { go } = await findGo(built.goVersion, o.env);
  const work = join(root, `build-kubelet-${version}`);
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  await writeFile(join(work, 'go.mod'), built.text);
  const goRun = (args: string[], what: string) =>
    must('LAB_BUILD_FAILED', go, args, { cwd: work, env, timeoutMs: 3_600_000, signal: o.signal }).catch((e: unknown) => {
      throw e instanceof KrError ? new KrError('LAB_BUILD_FAILED', `kubelet ${version}: ${what}: ${e.message}`) : e;
    });
  await goRun(['list', '-deps', 'k8s.io/kubernetes/cmd/kubelet'], 'downloading its modules');
  o.log.info(`kubelet ${version}: building it for real nodes (a few minutes on 2 cores; once)`);
  const t0 = clock.now();
  await goRun(['build', ...kubeBuildFlags(version), '-o', join(work, 'kubelet'), 'k8s.io/kubernetes/cmd/kubelet'], 'building');
  const seconds = Math.round((clock.now() - t0) / 1000);
  o.log.info(`kubelet ${version}: built in ${seconds}s`);
  await copyFile(join(work, 'kubelet'), `${file}.tmp`);
  await chmod(`${file}.tmp`, 0o755);
  await rename(`${file}.tmp`, file);
  const next: BinaryManifest = {
    ...manifest,
    kubelet: { buildSeconds: seconds },
    files: { ...manifest.files, kubelet: { sha256: await sha256(file), size: (await stat(file)).size } },
  };
  await writeFile(`${manifestFile}.tmp`, `${JSON.stringify(next, null, 2)}\n`);
  await rename(`${manifestFile}.tmp`, manifestFile);
  await rm(work, { recursive: true, force: true });
  return checkVersion(file, version);
}

async function checkVersion(file: string, want: string): Promise<string> {
  const got = await binaryVersion(file);
  if (got !== want)
    throw new KrError('LAB_BINARIES_MISSING', `${file} is kubelet ${got}, not ${want} (the lab's apiserver)`, { exit: EXIT.invalid });
  return file;
}
