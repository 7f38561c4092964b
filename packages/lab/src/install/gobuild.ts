import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { must, run } from '../host/host.js';

/**
 * Kubernetes 1.2x+ control planes built with this machine's Go from the Go module proxy: a small build module
 * under the cache requires `k8s.io/kubernetes` at the release and `replace`s each of its staging modules
 * (`k8s.io/api` …) by the matching `v0.x.y`, exactly as the release's own go.mod lists them; etcd likewise from
 * `go.etcd.io/etcd` at the version that release is tested with. Nothing of their source is kept in this repository.
 */
const KUBE_MODULE = 'k8s.io/kubernetes';
const KUBE_COMMANDS = ['kube-scheduler', 'kube-controller-manager', 'kube-apiserver', 'kubeadm'] as const;

/** The Go environment of a build: the machine's own GO* variables never leak in (GOROOT, GOFLAGS, GOTOOLCHAIN...). */
export function goEnv(root: string, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) if (!k.startsWith('GO') && !k.startsWith('CGO_')) env[k] = v;
  return {
    ...env,
    // the module proxy is whatever this machine's Go uses by default (GOPROXY from the environment is kept)
    ...(base.GOPROXY ? { GOPROXY: base.GOPROXY } : {}),
    ...(base.GONOSUMDB ? { GONOSUMDB: base.GONOSUMDB } : {}),
    GOENV: 'off',
    GOTOOLCHAIN: 'local',
    GOFLAGS: '-mod=mod',
    CGO_ENABLED: '0',
    GOPATH: join(root, 'go'),
    GOMODCACHE: join(root, 'go', 'mod'),
    GOCACHE: join(root, 'go', 'build'),
  };
}

/** `go version go1.26.8 linux/amd64` → [1, 26, 8]. */
export function parseGoVersion(text: string): [number, number, number] | undefined {
  const m = /go(\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

const older = (a: number[], b: number[]) => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return false;
};

/**
 * A Go toolchain new enough for `needs` (a go.mod `go` line such as `1.25.0`): `KUBE_RUNBOOK_GO`, then
 * /usr/local/go/bin/go, then `go` on PATH. Debian's golang-go (the 1.20 route) is usually too old.
 */
export async function findGo(needs: string, env: NodeJS.ProcessEnv = process.env): Promise<{ go: string; version: string }> {
  const want = parseGoVersion(`go${needs}`) ?? [1, 0, 0];
  const candidates = [
    env.KUBE_RUNBOOK_GO,
    '/usr/local/go/bin/go',
    ...(env.PATH ?? '')
      .split(':')
      .filter(Boolean)
      .map((p) => join(p, 'go')),
  ].filter((c): c is string => Boolean(c));
  const seen: string[] = [];
  for (const go of [...new Set(candidates)]) {
    const r = await run(go, ['version'], { env: { ...env, GOTOOLCHAIN: 'local', GOENV: 'off' }, timeoutMs: 20_000 });
    if (r.code !== 0) continue;
    const v = parseGoVersion(r.stdout);
    if (!v) continue;
    seen.push(`${go} (${v.join('.')})`);
    if (!older(v, want)) return { go, version: v.join('.') };
  }
  throw new KrError('LAB_GO_MISSING', `building this Kubernetes release needs Go ${needs} or newer; found ${seen.join(', ') || 'no go'}`, {
    details: [
      'Install a newer Go (e.g. from the Go project) and point KUBE_RUNBOOK_GO at its `go` binary, or pass --bin-dir with binaries you have.',
    ],
  });
}

/** The newest patch release of `1.<minor>` the module proxy serves (no pre-releases). */
async function newestPatch(go: string, minor: number, env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<string> {
  const out = await must('LAB_SOURCE_FAILED', go, ['list', '-m', '-versions', KUBE_MODULE], { env, timeoutMs: 300_000, signal });
  const patches = out
    .split(/\s+/)
    .map((v) => /^v1\.(\d+)\.(\d+)$/.exec(v))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[1]) === minor)
    .map((m) => Number(m[2]));
  if (!patches.length) throw new KrError('LAB_SOURCE_FAILED', `the Go module proxy serves no ${KUBE_MODULE} v1.${minor}.x release`);
  return `1.${minor}.${Math.max(...patches)}`;
}

/**
 * `go ARGS` in the directory `cwd` for a build (an hour at most), as `run(cwd, args, what)`: its output, or
 * LAB_BUILD_FAILED saying `<label>: <what>: <why>` (`label` names what is built, when `what` does not).
 */
export function goRunner(go: string, o: { env: NodeJS.ProcessEnv; signal?: AbortSignal; label?: string }) {
  return (cwd: string, args: string[], what: string): Promise<string> =>
    must('LAB_BUILD_FAILED', go, args, { cwd, env: o.env, timeoutMs: 3_600_000, signal: o.signal }).catch((e: unknown) => {
      throw e instanceof KrError ? new KrError('LAB_BUILD_FAILED', `${o.label ? `${o.label}: ` : ''}${what}: ${e.message}`) : e;
    });
}

export interface ModuleInfo {
  GoMod: string;
  Dir: string;
}

export async function download(go: string, mod: string, env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<ModuleInfo> {
  const out = await must('LAB_SOURCE_FAILED', go, ['mod', 'download', '-json', mod], { env, timeoutMs: 1_800_000, signal });
  const info = JSON.parse(out) as Partial<ModuleInfo> & { Error?: string };
  if (info.Error || !info.GoMod || !info.Dir)
    throw new KrError('LAB_SOURCE_FAILED', `go mod download ${mod}: ${info.Error ?? 'no module directory'}`);
  return { GoMod: info.GoMod, Dir: info.Dir };
}

/**
 * The build module's go.mod for `k8s.io/kubernetes` `version` (1.37.2), from the release's own go.mod: its `go`
 * and `godebug` lines, and a replace of every staging module it requires (as v0.0.0) by the matching v0.y.z.
 */
export function buildModuleText(kubeGoMod: string, version: string): { text: string; goVersion: string; staging: string[] } {
  const goVersion = /^go\s+(\S+)/m.exec(kubeGoMod)?.[1] ?? '1.22';
  const godebug = kubeGoMod.match(/^godebug\s+.*$/gm) ?? [];
  const godebugBlock = /^godebug\s*\(([\s\S]*?)^\)/m.exec(kubeGoMod);
  const required = new Set([...kubeGoMod.matchAll(/^\s*(?:require\s+)?(k8s\.io\/[\w./-]+)\s+v0\.0\.0\b/gm)].map((m) => m[1]!));
  const staging = [...kubeGoMod.matchAll(/^\s*(k8s\.io\/[\w./-]+)\s+=>\s+\.\/staging\//gm)]
    .map((m) => m[1]!)
    .filter((m) => required.has(m));
  const stagingVersion = `v0.${version.split('.').slice(1).join('.')}`;
  const lines = [
    'module kube-runbook-lab-build',
    '',
    `go ${goVersion}`,
    ...(godebugBlock ? ['', `godebug (${godebugBlock[1]})`] : godebug.length ? ['', ...godebug] : []),
    '',
    `require ${KUBE_MODULE} v${version}`,
    '',
    'replace (',
    ...staging.map((m) => `\t${m} => ${m} ${stagingVersion}`),
    ')',
    '',
  ];
  return { text: lines.join('\n'), goVersion, staging };
}

/**
 * The `go build` flags of a Kubernetes command, as the release builds them: stripped, without the test and SELinux-less
 * code, and stamped with the version that `/version` and `--version` report.
 */
export function kubeBuildFlags(version: string): string[] {
  const [major, minor] = version.split('.');
  const x = (pkg: string) =>
    [`gitVersion=v${version}`, `gitMajor=${major}`, `gitMinor=${minor}`, 'gitTreeState=clean', 'gitCommit=']
      .map((kv) => `-X ${pkg}.${kv}`)
      .join(' ');
  return [
    '-trimpath',
    '-tags=selinux,notest,grpcnotrace',
    `-ldflags=-s -w ${x('k8s.io/component-base/version')} ${x('k8s.io/client-go/pkg/version')}`,
  ];
}

/** The etcd version a release is tested with: kubeadm's `DefaultEtcdVersion` in the release's source. */
export function etcdVersionOf(constantsGo: string): string | undefined {
  return /DefaultEtcdVersion\s*=\s*"v?(\d+\.\d+\.\d+)/.exec(constantsGo)?.[1];
}

export interface GoBuildOptions {
  log: Logger;
  clock: Clock;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export interface GoBuilt {
  /** Directory holding kube-apiserver, kube-controller-manager, kube-scheduler, kubeadm, etcd and etcdctl. */
  out: string;
  version: string;
  etcdVersion: string;
  goVersion: string;
  seconds: { download: number; build: number };
}

/** Downloads and builds `1.<minor>`'s newest patch (or `version` when given) into `<work>/out`. */
export async function goBuild(
  o: GoBuildOptions,
  root: string,
  work: string,
  release: { minor: number; version?: string },
): Promise<GoBuilt> {
  const { log, clock } = o;
  const env = goEnv(root, o.env);
  const firstGo = await findGo('1.21', o.env);
  const version = release.version ?? (await newestPatch(firstGo.go, release.minor, env, o.signal));
  const t0 = clock.now();
  const secs = (from: number) => Math.round((clock.now() - from) / 1000);
  log.info(`Kubernetes ${version}: downloading ${KUBE_MODULE}@v${version} from the Go module proxy`);
  const kube = await download(firstGo.go, `${KUBE_MODULE}@v${version}`, env, o.signal);
  const built = buildModuleText(await readFile(kube.GoMod, 'utf8'), version);
  const { go, version: goVersion } = await findGo(built.goVersion, o.env);
  const etcdVersion = etcdVersionOf(
    await readFile(join(kube.Dir, 'cmd', 'kubeadm', 'app', 'constants', 'constants.go'), 'utf8').catch(() => ''),
  );
  if (!etcdVersion)
    throw new KrError(
      'LAB_SOURCE_FAILED',
      `cannot tell which etcd Kubernetes ${version} is tested with (no DefaultEtcdVersion in its kubeadm constants)`,
    );
  const kubeDir = join(work, 'kubernetes');
  const etcdDir = join(work, 'etcd');
  const out = join(work, 'out');
  await rm(work, { recursive: true, force: true });
  await Promise.all([mkdir(kubeDir, { recursive: true }), mkdir(etcdDir, { recursive: true }), mkdir(out, { recursive: true })]);
  await writeFile(join(kubeDir, 'go.mod'), built.text);
  await writeFile(
    join(etcdDir, 'go.mod'),
    `module kube-runbook-lab-etcd\n\ngo ${built.goVersion}\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 v${etcdVersion}\n\tgo.etcd.io/etcd/etcdctl/v3 v${etcdVersion}\n)\n`,
  );
  log.info(
    `Kubernetes ${version}: resolving its modules (${built.staging.length} staging modules at v0.${version.split('.').slice(1).join('.')}) and etcd ${etcdVersion}`,
  );
  const goRun = goRunner(go, { env, signal: o.signal });
  // listing the packages' dependencies downloads exactly the modules the build needs
  await goRun(kubeDir, ['list', '-deps', ...KUBE_COMMANDS.map((b) => `${KUBE_MODULE}/cmd/${b}`)], 'downloading the Kubernetes modules');
  await goRun(etcdDir, ['list', '-deps', 'go.etcd.io/etcd/server/v3', 'go.etcd.io/etcd/etcdctl/v3'], 'downloading the etcd modules');
  const downloadSeconds = secs(t0);
  log.info(`Kubernetes ${version}: modules downloaded in ${downloadSeconds}s; building with Go ${goVersion} (about 10 minutes on 2 cores)`);
  const t1 = clock.now();
  // One `go build` per module for all its commands, both modules at once: the go command schedules every package
  // of the three Kubernetes commands over the cores and links them side by side, and etcd's build fills the cores
  // while Kubernetes links (a command after another left a core idle through each link).
  const etcdLd = `-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v${etcdVersion}`;
  const timed = async (what: string, run: Promise<unknown>) => {
    const tb = clock.now();
    await run;
    log.info(`${what} in ${secs(tb)}s`);
  };
  await Promise.all([
    timed(
      `Kubernetes ${version}: built ${KUBE_COMMANDS.join(', ')}`,
      goRun(
        kubeDir,
        ['build', ...kubeBuildFlags(version), '-o', `${out}/`, ...KUBE_COMMANDS.map((b) => `${KUBE_MODULE}/cmd/${b}`)],
        `building ${KUBE_COMMANDS.join(', ')}`,
      ),
    ),
    timed(
      `etcd ${etcdVersion}: built etcd, etcdctl`,
      (async () => {
        for (const [pkg, b] of [
          ['go.etcd.io/etcd/server/v3', 'etcd'],
          ['go.etcd.io/etcd/etcdctl/v3', 'etcdctl'],
        ] as const)
          await goRun(etcdDir, ['build', '-trimpath', `-ldflags=${etcdLd}`, '-o', join(out, b), pkg], `building ${b}`);
      })(),
    ),
  ]);
  return { out, version, etcdVersion, goVersion, seconds: { download: downloadSeconds, build: secs(t1) } };
}
