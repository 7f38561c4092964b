import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject } from 'ajv';
import formats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { allSchemaFiles } from '../src/cli/schema.js';

const schemaDir = new URL('../schema/', import.meta.url);
const files = await allSchemaFiles();

describe('schema/*.schema.json', () => {
  it.each(files.map((f) => [f.name, f.text]))('%s matches the zod schemas', async (name, text) => {
    const committed = await readFile(new URL(name, schemaDir), 'utf8').catch(() => '');
    if (committed !== text) expect.fail(`${fileURLToPath(new URL(name, schemaDir))} is out of date: run \`npm run schema\``);
  });

  it("gives editors each probe's params where a guard names it", () => {
    const runbook = JSON.parse(files.find((f) => f.name === 'runbook.schema.json')!.text);
    const guard = runbook.properties.spec.properties.guards.items;
    const then = (id: string) => {
      const ref: string = guard.allOf.find((c: { if: { properties: { probe: { const: string } } } }) => c.if.properties.probe.const === id)
        .then.properties.with.$ref;
      return runbook.definitions[ref.replace('#/definitions/', '')];
    };
    expect(Object.keys(then('promql').properties)).toEqual(
      expect.arrayContaining(['url', 'query', 'comparator', 'for', 'empty', 'bearerTokenFile', 'ca']),
    );
    expect(then('kubernetes-object').properties.aggregate).toBeDefined();
    expect(then('kubernetes-object').required).toEqual(['apiVersion', 'kind', 'condition']);
    expect(then('workload-availability').properties.kind.enum).toEqual(['Deployment', 'StatefulSet', 'DaemonSet', 'Service']);
  });

  it("gives each action's with: its parameters and the nodes it acts on by default", () => {
    const { definitions } = JSON.parse(files.find((f) => f.name === 'runbook.schema.json')!.text);
    expect(Object.keys(definitions['action-throttle-etcd-disk'].properties)).toEqual(
      expect.arrayContaining(['nodes', 'readBps', 'writeBps']),
    );
    expect(definitions['action-stop-etcd'].properties.nodes.default).toEqual({ role: 'etcd' });
    expect(definitions['action-stop-kubelet'].properties.nodes.default).toBe('workers');
  });
});

/** The committed runbook schema, through a standard JSON Schema validator, as an editor uses it. */
describe('schema/runbook.schema.json in a JSON Schema validator (ajv)', async () => {
  const schema = JSON.parse(await readFile(new URL('runbook.schema.json', schemaDir), 'utf8'));
  const ajv = new Ajv({ allErrors: true, strict: false });
  // the CommonJS module's `default`: what both Node's and vitest's interop hand over
  formats.default(ajv);
  const validate = ajv.compile(schema);
  const runbook = (spec: string) =>
    parse(`apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: schema-check}
spec:
${spec}`);
  const errors = () =>
    (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`).join('\n');

  it('accepts every shipped runbook and example runbook', async () => {
    const dirs = ['runbooks', 'runbooks/emergency', 'examples'];
    let checked = 0;
    for (const dir of dirs)
      for (const f of (await readdir(new URL(`../${dir}/`, import.meta.url))).filter((n) => n.endsWith('.yaml'))) {
        const doc = parse(await readFile(new URL(`../${dir}/${f}`, import.meta.url), 'utf8'));
        if (doc?.kind !== 'Runbook') continue;
        checked++;
        expect(validate(doc), `${dir}/${f}:\n${errors()}`).toBe(true);
      }
    expect(checked).toBeGreaterThan(5);
  });

  /** Each place a runbook names an action or a probe, with WITH as its `with:`; the rest of the runbook is valid. */
  const sites: Record<string, (w: string) => string> = {
    step: (w) => `  steps:\n    - {action: stop-kubelet, with: ${w}}`,
    parallel: (w) => `  steps:\n    - parallel:\n        - {action: stop-kubelet, with: ${w}}`,
    remediation: (w) => `  steps:\n    - {wait: 1s}\n  remediation:\n    - {action: stop-kubelet, with: ${w}}`,
    orElse: (w) => `  steps:\n    - {action: disable-taint-eviction, orElse: {action: stop-kubelet, with: ${w}}}`,
    guard: (w) => `  guards:\n    - {probe: pod-deletions, with: ${w}, onViolation: abort}\n  steps:\n    - {wait: 1s}`,
    expect: (w) => `  steps:\n    - {expect: {probe: pod-deletions, with: ${w}}, within: 1m}`,
    waitFor: (w) => `  steps:\n    - {wait: 1s}\n  rollback: {waitFor: {probe: pod-deletions, with: ${w}}}`,
  };
  const good: Record<string, string> = { stop: '{nodes: workers, timeout: 5s}', probe: '{max: 0}' };

  it.each(Object.entries(sites))("%s: rejects a parameter the module does not have, accepts the module's own", (site, rb) => {
    const own = site === 'guard' || site === 'expect' || site === 'waitFor' ? good.probe! : good.stop!;
    expect(validate(runbook(rb(own))), errors()).toBe(true);
    expect(validate(runbook(rb('{durationn: 5s}')))).toBe(false);
    expect(errors()).toMatch(/\/with must NOT have additional properties \{"additionalProperty":"durationn"\}/);
  });

  it("checks the types of an action's parameters and its node selector", () => {
    expect(validate(runbook(sites.step!('{timeout: soon}')))).toBe(false);
    expect(errors()).toContain('/spec/steps/0/with/timeout must match pattern');
    expect(validate(runbook(sites.step!('{nodes: someone}')))).toBe(false);
    expect(errors()).toContain('/spec/steps/0/with/nodes must be equal to one of the allowed values');
    expect(validate(runbook(sites.step!('{nodes: {role: worker, count: 1}}'))), errors()).toBe(true);
  });

  it('rejects an action or probe id it does not know', () => {
    expect(validate(runbook('  steps:\n    - {action: stop-kubelett}'))).toBe(false);
    expect(errors()).toContain('/spec/steps/0/action must be equal to one of the allowed values');
    expect(validate(runbook(sites.guard!('{}').replace('pod-deletions', 'pod-deletion')))).toBe(false);
    expect(errors()).toContain('/spec/guards/0/probe must be equal to one of the allowed values');
  });
});

/** A saved report through a standard JSON Schema validator, as tools reading report.json would check it. */
describe('schema/report.schema.json in a JSON Schema validator (ajv)', () => {
  it('accepts the report of a lab run in examples/reports, and refuses one of a newer version', async () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    formats.default(ajv);
    const validate = ajv.compile(JSON.parse(await readFile(new URL('report.schema.json', schemaDir), 'utf8')));
    const report = JSON.parse(await readFile(new URL('../examples/reports/apiserver-outage/report.json', import.meta.url), 'utf8'));
    expect(validate(report), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...report, reportVersion: 2 })).toBe(false);
  });
});
