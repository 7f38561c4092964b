import { readFileSync } from 'node:fs';

/** Set by the single-executable build (scripts/sea.mjs), which has no package.json beside it. */
declare const __KUBE_RUNBOOK_VERSION__: string | undefined;

let cached: string | undefined;

/** The tool's version: the one the single executable was built with, else its package.json's (read once). */
export function toolVersion(): string {
  if (typeof __KUBE_RUNBOOK_VERSION__ === 'string') return __KUBE_RUNBOOK_VERSION__;
  cached ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return cached;
}

/** Set by the single-executable build (scripts/sea.mjs): the git commit it was built from, when it knew it. */
declare const __KUBE_RUNBOOK_COMMIT__: string | null | undefined;

/** What `kube-runbook version` reports: the tool's version and how this copy of it was built and runs. */
export interface BuildInfo {
  version: string;
  /** The git commit the build was made from; null where the build did not record it (npm installs). */
  commit: string | null;
  node: string;
  platform: string;
  /** Whether this is the single executable (Node built in), not the npm package. */
  singleExecutable: boolean;
}

export function buildInfo(sea: () => boolean): BuildInfo {
  return {
    version: toolVersion(),
    commit: typeof __KUBE_RUNBOOK_COMMIT__ === 'string' ? __KUBE_RUNBOOK_COMMIT__ : null,
    node: process.version,
    platform: `${process.platform}/${process.arch}`,
    singleExecutable: sea(),
  };
}
