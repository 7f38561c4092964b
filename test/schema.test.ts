import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { probeParams } from '../src/cli/schema.js';
import { schemaFiles } from '../src/runbook/json-schema.js';

const schemaDir = new URL('../schema/', import.meta.url);
const files = schemaFiles(await probeParams());

describe('schema/*.schema.json', () => {
  it.each(files.map((f) => [f.name, f.text]))('%s matches the zod schemas', async (name, text) => {
    const committed = await readFile(new URL(name, schemaDir), 'utf8').catch(() => '');
    if (committed !== text) expect.fail(`${fileURLToPath(new URL(name, schemaDir))} is out of date: run \`npm run schema\``);
  });

  it("gives editors each probe's params where a guard names it", () => {
    const runbook = JSON.parse(files.find((f) => f.name === 'runbook.schema.json')!.text);
    const guard = runbook.properties.spec.properties.guards.items;
    const then = (id: string) => guard.allOf.find((c: { if: { properties: { probe: { const: string } } } }) => c.if.properties.probe.const === id).then.properties.with;
    expect(Object.keys(then('promql').properties)).toEqual(expect.arrayContaining(['url', 'query', 'comparator', 'for', 'empty', 'bearerTokenFile', 'ca']));
    expect(then('kubernetes-object').properties.aggregate).toBeDefined();
    expect(then('kubernetes-object').required).toEqual(['apiVersion', 'kind', 'condition']);
    expect(then('workload-availability').properties.kind.enum).toEqual(['Deployment', 'StatefulSet', 'DaemonSet', 'Service']);
  });
});
