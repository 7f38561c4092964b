import { z } from 'zod';
import { Inventory } from '../inventory/schema.js';
import type { ParamsMeta } from './catalog.js';
import { moduleKindOf, Runbook } from './schema.js';
import { NodeSelector } from './selectors.js';

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

/** A zod schema as a JSON Schema file's text, with its id, title and description. */
export function generate(schema: z.ZodType, id: string, title: string, description: string): string {
  const json = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' });
  const { $schema, ...rest } = json;
  return `${JSON.stringify({ $schema, $id: id, title, description, ...rest }, null, 2)}\n`;
}

type Json = Record<string, unknown>;

/** The actions and probes a runbook may name, by id (sorted), as the language sees them. */
export interface SchemaModules {
  actions: Record<string, ParamsMeta>;
  probes: Record<string, ParamsMeta>;
}

type Kind = NonNullable<ReturnType<typeof moduleKindOf>>;
const definitionName = (kind: Kind, id: string) => `${kind}-${id}`;

/**
 * Each mapping that names an action (steps, parallel steps, remediation, `orElse`) or a probe (guards, expect,
 * rollback.waitFor) gets that module's own `with:` schema, chosen by `if: {action: ID}` / `if: {probe: ID}`, and its
 * id is one of the known ones, so editors complete and check ids and params. The `with:` schemas are written once,
 * under `definitions`, and referred to from each place.
 */
function withModuleParams(node: unknown, ids: Record<Kind, string[]>): void {
  if (Array.isArray(node)) return node.forEach((n) => withModuleParams(n, ids));
  if (!node || typeof node !== 'object') return;
  const o = node as Json;
  for (const v of Object.values(o)) withModuleParams(v, ids);
  const props = o.properties as Json | undefined;
  const kind = props ? moduleKindOf(Object.keys(props)) : undefined;
  if (!props || !kind || ids[kind].length === 0) return;
  props[kind] = { ...(props[kind] as Json), enum: ids[kind] };
  o.allOf = ids[kind].map((id) => ({
    if: { properties: { [kind]: { const: id } }, required: [kind] },
    then: { properties: { with: { $ref: `#/definitions/${definitionName(kind, id)}` } } },
  }));
}

function inputSchema(schema: z.ZodType): Json {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** An action's `with:`: its own parameters and, for one that can run on nodes, `nodes` (a NodeSelector) beside them. */
function actionWith(meta: ParamsMeta): Json {
  const own = inputSchema(meta.params);
  if (meta.targets !== 'nodes' && !meta.nodesWhen) return own;
  const nodes = meta.nodesWhen
    ? {
        ...inputSchema(NodeSelector),
        description: `the nodes to act on: with ${meta.nodesWhen.param}: ${meta.nodesWhen.equals}, and then required`,
      }
    : { ...inputSchema(NodeSelector), description: 'the nodes to act on', default: meta.defaultNodes ?? 'all' };
  return { ...own, properties: { nodes, ...(own.properties as Json | undefined) } };
}

/** The schema files; `modules` adds each action's and probe's `with:` to the runbook schema. */
export function schemaFiles(modules: SchemaModules = { actions: {}, probes: {} }): SchemaFile[] {
  const runbook = generate(
    Runbook,
    'urn:kube-runbook:schema:runbook:v1',
    'kube-runbook Runbook',
    'A chaos-engineering runbook: guards, steps (action, expect, wait, confirm, parallel), remediation, rollback. ' +
      'The with: parameters of each action and probe are checked by `kube-runbook validate`.',
  );
  const parsed = JSON.parse(runbook) as Json;
  withModuleParams(parsed, { action: Object.keys(modules.actions), probe: Object.keys(modules.probes) });
  const definitions = {
    ...Object.fromEntries(Object.entries(modules.actions).map(([id, m]) => [definitionName('action', id), actionWith(m)])),
    ...Object.fromEntries(Object.entries(modules.probes).map(([id, m]) => [definitionName('probe', id), inputSchema(m.params)])),
  };
  if (Object.keys(definitions).length > 0) parsed.definitions = definitions;
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
