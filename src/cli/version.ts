import { readFileSync } from 'node:fs';

/** Set by the single-executable build (scripts/sea.mjs), which has no package.json beside it. */
declare const __KUBE_RUNBOOK_VERSION__: string | undefined;

/** The CLI's version: package.json's, or the one the single executable was built with. */
export function version(): string {
  if (typeof __KUBE_RUNBOOK_VERSION__ === 'string') return __KUBE_RUNBOOK_VERSION__;
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
