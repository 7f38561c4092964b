import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';

/** Writes the runbook `name` with `spec` as `<dir>/<name>.yaml`; its path. */
export function writeRunbook(dir: string, name: string, spec: Record<string, unknown>): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify({ apiVersion: 'kube-runbook/v1', kind: 'Runbook', metadata: { name }, spec }));
  return file;
}

/**
 * Writes the runbook `name` as YAML text, `<dir>/<name>.yaml`, allowed on `context` for 10 minutes with `safety` added
 * to its spec.safety (flow style: `faultTtl: 2m`) and `steps` (the YAML lines below `steps:`); its path.
 */
export function writeRunbookYaml(dir: string, name: string, context: string, safety: string, steps: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: ${name}}
spec:
  safety: {allowContexts: [${JSON.stringify(context)}], maxDuration: 10m, ${safety}}
  steps:
${steps}`,
  );
  return file;
}
