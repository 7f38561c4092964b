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
