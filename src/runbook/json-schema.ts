import { z } from 'zod';
import { Inventory } from '../inventory/schema.js';
import { Runbook } from './schema.js';

/**
 * JSON Schema (draft-07) of runbooks and inventories, generated from the zod schemas, for editors
 * (`# yaml-language-server: $schema=../schema/runbook.schema.json`). Inputs are described: durations are
 * strings with a pattern, defaults are what a person would write.
 */
export interface SchemaFile {
  /** Relative to the schema directory. */
  name: string;
  text: string;
}

function generate(schema: z.ZodType, id: string, title: string, description: string): string {
  const json = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' });
  const { $schema, ...rest } = json;
  return `${JSON.stringify({ $schema, $id: id, title, description, ...rest }, null, 2)}\n`;
}

type Json = Record<string, unknown>;

/**
 * Each mapping that names a probe (guards, expect, rollback.waitFor) gets the probe's own `with:` schema, chosen
 * by `if: {probe: ID}`, so editors complete and check the params of each probe.
 */
function withProbeParams(node: unknown, probes: Record<string, Json>): void {
  if (Array.isArray(node)) return node.forEach((n) => withProbeParams(n, probes));
  if (!node || typeof node !== 'object') return;
  const o = node as Json;
  for (const v of Object.values(o)) withProbeParams(v, probes);
  const props = o.properties as Json | undefined;
  if (!props || !('probe' in props) || !('with' in props)) return;
  o.allOf = Object.entries(probes).map(([id, params]) => ({
    if: { properties: { probe: { const: id } }, required: ['probe'] },
    then: { properties: { with: params } },
  }));
}

function inputSchema(schema: z.ZodType): Json {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** The schema files; `probes` (id → params schema, sorted) adds each probe's `with:` to the runbook schema. */
export function schemaFiles(probes: Record<string, z.ZodType> = {}): SchemaFile[] {
  const probeParams = Object.fromEntries(Object.entries(probes).map(([id, p]) => [id, inputSchema(p)]));
  const runbook = generate(
    Runbook,
    'urn:kube-runbook:schema:runbook:v1',
    'kube-runbook Runbook',
    'A chaos-engineering runbook: guards, steps (action, expect, wait, confirm, parallel), remediation, rollback. ' +
      'The with: parameters of each action and probe are checked by `kube-runbook validate`.',
  );
  const parsed = JSON.parse(runbook) as Json;
  withProbeParams(parsed, probeParams);
  return [
    {
      name: 'runbook.schema.json',
      text: `${JSON.stringify(parsed, null, 2)}\n`,
    },
    {
      name: 'inventory.schema.json',
      text: generate(
        Inventory,
        'urn:kube-runbook:schema:inventory:v1',
        'kube-runbook Inventory',
        'How kube-runbook reaches the nodes of a cluster and what runs where.',
      ),
    },
  ];
}
