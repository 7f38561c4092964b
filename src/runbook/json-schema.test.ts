import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { schemaFiles } from './json-schema.js';

const schemaDir = new URL('../../schema/', import.meta.url);

describe('schema/*.schema.json', () => {
  it.each(schemaFiles().map((f) => [f.name, f.text]))('%s matches the zod schema', async (name, text) => {
    const committed = await readFile(new URL(name, schemaDir), 'utf8').catch(() => '');
    if (committed !== text) expect.fail(`${fileURLToPath(new URL(name, schemaDir))} is out of date: run \`npm run schema\``);
  });

  it('describes inputs: durations are strings with a pattern and their defaults as written', () => {
    const runbook = JSON.parse(schemaFiles().find((f) => f.name === 'runbook.schema.json')!.text);
    expect(runbook.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(runbook.title).toBe('kube-runbook Runbook');
    const maxDuration = runbook.properties.spec.properties.safety.properties.maxDuration;
    expect(maxDuration).toMatchObject({ type: 'string', default: '30m' });
    expect(new RegExp(maxDuration.pattern).test('1m30s')).toBe(true);
    expect(new RegExp(maxDuration.pattern).test('5 minutes')).toBe(false);
    expect(runbook.required).toEqual(['apiVersion', 'kind', 'metadata', 'spec']);
    expect(runbook.additionalProperties).toBe(false);
  });
});
