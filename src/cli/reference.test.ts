import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { defaultRegistry as registry } from '../engine/registry.js';
import { NodeSelector } from '../runbook/selectors.js';
import { actionExample, exampleYaml, probeExample } from './reference.js';
import type { z } from 'zod';

/**
 * A `with:` block as the engine splits it: `nodes` (the engine's) from the module's own parameters. With ONLY, just
 * that parameter's own value must be valid (a refinement across parameters may not let it go with those shown: `top` or `subjects`).
 */
function check(schema: z.ZodType, block: Record<string, unknown> | null | undefined, where: string, only?: string): void {
  const { nodes, ...params } = block ?? {};
  if (nodes !== undefined) expect(NodeSelector.safeParse(nodes).success, `${where}: nodes ${JSON.stringify(nodes)}`).toBe(true);
  const issues = (schema.safeParse(params).error?.issues ?? []).filter(
    (i) => only === undefined || (i.path[0] === only && i.code !== 'custom'),
  );
  expect(issues, `${where}: ${JSON.stringify(params)}`).toEqual([]);
}

/** The block with every `# ` taken away: each parameter the example leaves as a comment, given. */
const uncommented = (yaml: string) => yaml.replace(/^(\s*)# /gm, '$1');

for (const kind of ['action', 'probe'] as const)
  describe(`the example with: block of every ${kind}`, () => {
    for (const id of registry.ids(kind))
      it(`${id}: parses, validates against its own params, and so does each commented parameter given`, async () => {
        const meta = kind === 'action' ? (await registry.action(id)).meta : (await registry.probe(id)).meta;
        const params = kind === 'action' ? actionExample(meta as never) : probeExample(meta as never);
        const yaml = exampleYaml(params);
        if (!yaml) return expect(params).toEqual([]);
        const asIs = parse(yaml) as { with?: Record<string, unknown> | null } | null;
        check(meta.params, asIs?.with, `${id} as shown`);
        const all = (parse(uncommented(yaml)) as { with: Record<string, unknown> }).with;
        expect(Object.keys(all), `${id}: every parameter is in the block`).toEqual(params.map((p) => p.name));
        for (const name of Object.keys(all)) {
          const one = Object.fromEntries(Object.entries(all).filter(([k]) => k === name || params.find((p) => p.name === k)?.given));
          check(meta.params, one, `${id} with ${name}`, name);
        }
      });
  });

describe('example blocks', () => {
  it('give what is required and comment what has a default', async () => {
    const m = (await registry.action('starve-cpu')).meta;
    const yaml = exampleYaml(actionExample(m));
    expect(yaml).toMatch(/^with:\n/);
    expect(yaml).toMatch(/^ {2}component: apiserver$/m);
    expect(yaml).toMatch(/^ {2}# nodes: /m);
    const k = (await registry.action('stop-kubelet')).meta;
    expect(exampleYaml(actionExample(k))).toBe('# with:\n  # nodes: workers\n  # timeout: 2m');
  });
});
