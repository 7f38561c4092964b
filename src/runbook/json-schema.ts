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

export function schemaFiles(): SchemaFile[] {
  return [
    {
      name: 'runbook.schema.json',
      text: generate(
        Runbook,
        'urn:kube-runbook:schema:runbook:v1',
        'kube-runbook Runbook',
        'A chaos-engineering runbook: guards, steps (action, expect, wait, confirm, parallel), remediation, rollback. ' +
          'The with: parameters of each action and probe are checked by `kube-runbook validate`.',
      ),
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
