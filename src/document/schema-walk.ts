import type { z } from 'zod';
import type { DocPath } from './problems.js';

/**
 * Reading zod schemas by their definitions, to say what a place in a document expects: the keys a mapping
 * allows, which variant of a union a value means, what a type is called in a message.
 */
export type Schema = z.core.$ZodType;
interface Def {
  type: string;
  [key: string]: unknown;
}
const def = (s: Schema) => s._zod.def as unknown as Def;

const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'readonly', 'catch', 'nonoptional', 'success']);

/** The schema that checks the input, without optional/default/pipe wrappers. */
function unwrap(schema: Schema): Schema {
  let s = schema;
  for (let i = 0; i < 32; i++) {
    const d = def(s);
    if (WRAPPERS.has(d.type)) s = d.innerType as Schema;
    else if (d.type === 'pipe') {
      const input = d.in as Schema;
      s = def(input).type === 'transform' ? (d.out as Schema) : input;
    } else if (d.type === 'lazy') s = (d.getter as () => Schema)();
    else return s;
  }
  return s;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The union's options, or undefined when the schema is not a union. */
export function unionOptions(schema: Schema): Schema[] | undefined {
  const d = def(unwrap(schema));
  return d.type === 'union' ? (d.options as Schema[]) : undefined;
}

export function objectShape(schema: Schema): Record<string, Schema> | undefined {
  const d = def(unwrap(schema));
  return d.type === 'object' ? (d.shape as Record<string, Schema>) : undefined;
}

/** Keys of an object schema that a value must have. */
function requiredKeys(schema: Schema): string[] {
  const shape = objectShape(schema) ?? {};
  return Object.keys(shape).filter((k) => shape[k]!._zod.optin === undefined);
}

/** Whether a value is of the JSON type the schema takes (its content may still be wrong). */
function acceptsType(schema: Schema, v: unknown): boolean {
  const s = unwrap(schema);
  const d = def(s);
  switch (d.type) {
    case 'string':
    case 'template_literal':
      return typeof v === 'string';
    case 'number':
    case 'int':
      return typeof v === 'number';
    case 'boolean':
      return typeof v === 'boolean';
    case 'null':
      return v === null;
    case 'object':
    case 'record':
      return isPlainObject(v);
    case 'array':
    case 'tuple':
      return Array.isArray(v);
    case 'enum':
      return Object.values(d.entries as Record<string, unknown>).some((e) => typeof e === typeof v);
    case 'literal':
      return (d.values as unknown[]).some((e) => typeof e === typeof v);
    case 'union':
      return (d.options as Schema[]).some((o) => acceptsType(o, v));
    default:
      return true;
  }
}

/** How a message names what a schema takes: `a string`, `a mapping`, `one of a, b`. */
function describeType(schema: Schema): string {
  const d = def(unwrap(schema));
  switch (d.type) {
    case 'string':
    case 'template_literal':
      return 'a string';
    case 'number':
    case 'int':
      return 'a number';
    case 'boolean':
      return 'true or false';
    case 'object':
    case 'record':
      return 'a mapping';
    case 'array':
    case 'tuple':
      return 'a list';
    case 'enum':
      return `one of ${Object.values(d.entries as Record<string, unknown>).join(', ')}`;
    case 'literal':
      return (d.values as unknown[]).map((v) => JSON.stringify(v)).join(' or ');
    case 'union':
      return [...new Set((d.options as Schema[]).map(describeType))].join(' or ');
    default:
      return d.type;
  }
}

/** Which option of a union a value means: the one of its type; among mappings, the one whose required keys it has. */
export type Pick = { index: number } | { message: string; suggestFor?: { word: string; candidates: string[] } };

export function pickOption(options: readonly Schema[], v: unknown): Pick {
  const typed = options.map((o, index) => ({ o, index })).filter(({ o }) => acceptsType(o, v));
  if (typed.length === 1) return { index: typed[0]!.index };
  if (typed.length === 0) return { message: `expected ${[...new Set(options.map(describeType))].join(' or ')}` };
  if (!isPlainObject(v)) return { index: typed[0]!.index };
  const keyed = typed.filter(({ o }) => requiredKeys(o).length > 0);
  const discriminators = [...new Set(keyed.flatMap(({ o }) => requiredKeys(o)))];
  if (discriminators.length === 0) return { index: typed[0]!.index };
  const matching = keyed.filter(({ o }) => requiredKeys(o).every((k) => k in v));
  if (matching.length === 1) return { index: matching[0]!.index };
  const present = discriminators.filter((k) => k in v);
  if (present.length > 1)
    return { message: `expected only one of the keys ${discriminators.join(', ')}, but found ${present.join(' and ')}` };
  if (present.length === 1) {
    // one discriminating key, but its variant also needs others: report that variant's problems
    const owner = keyed.find(({ o }) => requiredKeys(o).includes(present[0]!));
    if (owner) return { index: owner.index };
  }
  const unknown = Object.keys(v).filter((k) => !keyed.some(({ o }) => k in (objectShape(o) ?? {})));
  return {
    message: `expected one of the keys ${discriminators.join(', ')}`,
    ...(unknown.length > 0 ? { suggestFor: { word: unknown[0]!, candidates: discriminators } } : {}),
  };
}

/** The concrete schema for a value: wrappers removed, unions resolved by pickOption. */
export function resolve(schema: Schema, v: unknown): Schema | undefined {
  let s = unwrap(schema);
  for (let i = 0; i < 8; i++) {
    const options = unionOptions(s);
    if (!options) return s;
    const pick = pickOption(options, v);
    if (!('index' in pick)) return undefined;
    s = unwrap(options[pick.index]!);
  }
  return s;
}

/** The schema at a path of a value checked against `root`, or undefined where it cannot be told. */
export function schemaAt(root: Schema, rootValue: unknown, path: DocPath): Schema | undefined {
  let s: Schema | undefined = root;
  let v: unknown = rootValue;
  for (const seg of path) {
    const r = resolve(s, v);
    if (!r) return undefined;
    const d = def(r);
    if (d.type === 'object') s = (d.shape as Record<string, Schema>)[String(seg)];
    else if (d.type === 'record') s = d.valueType as Schema;
    else if (d.type === 'array') s = d.element as Schema;
    else return undefined;
    if (!s) return undefined;
    v = isPlainObject(v) || Array.isArray(v) ? (v as Record<string | number, unknown>)[seg] : undefined;
  }
  return s;
}
