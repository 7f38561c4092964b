// The types of scripts/sea-lib.mjs, for the tests that import it (test/sea.test.ts, test/e2e/package.test.ts).

export interface Platform {
  /** As in the file names: linux-x64, linux-arm64. */
  name: string;
  /** krew's selector labels. */
  os: string;
  arch: string;
  /** The npm package of Node's binary for it. */
  nodePackage: string;
  /** What `readelf -h` says its machine is. */
  machine: string;
}

export const RELEASES: string;
export const PLATFORMS: Platform[];
export const ARCHIVE_FILES: string[];
export function executableName(platform: Platform): string;
export function archiveName(platform: Platform): string;
export function completionEntry(): string;
export function krewManifest(version: string, archives: { platform: Platform; sha256: string }[]): string;
export function selfExtracting(o: { version: string; platform: Platform; unpacked: Buffer }): Buffer;
