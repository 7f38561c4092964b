import { describe, expect, it } from 'vitest';
import { schemaFiles } from './json-schema.js';

describe('schema/*.schema.json', () => {
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
