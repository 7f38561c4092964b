import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';

/** Writes the runbook `name` with `spec` as `<dir>/<name>.yaml`; its path. */
export function writeRunbook(dir: string, name: string, spec: Record<string, unknown>): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify({ apiVersion: 'kube-runbook/v1', kind: 'Runbook', metadata: { name }, spec }));
  return file;
}
