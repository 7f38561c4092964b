import { z } from 'zod';
import { formatDuration, parseDuration } from './duration.js';

const DURATION_MESSAGE = 'expected a duration such as 500ms, 10s, 5m or 1h';
const DURATION_PATTERN = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/;

/** A duration string (`500ms`, `10s`, `5m`); parsed value is milliseconds. JSON Schema shows it as a string. */
export const duration = () =>
  z
    .string({ error: DURATION_MESSAGE })
    .regex(DURATION_PATTERN, { message: DURATION_MESSAGE })
    .transform((s) => parseDuration(s)!)
    .meta({ description: 'duration: 500ms, 10s, 5m, 1h, 1m30s' });

/** An http:// or https:// URL with no white space or quote in it (probes hand it to curl or wget on a node). */
export const httpUrl = () => z.string().regex(/^https?:\/\/[^\s'"]+$/, { message: 'expected an http:// or https:// URL' });

interface JsonNode {
  properties?: Record<string, JsonNode>;
  anyOf?: JsonNode[];
  oneOf?: JsonNode[];
  items?: JsonNode;
  pattern?: string;
  const?: unknown;
}

const jsonOf = new WeakMap<z.ZodType, JsonNode>();

/**
 * Parsed parameters with each duration written back as a person writes it (`120000` → `2m`), for plans and
 * messages: the schema says which numbers are durations (the `duration()` fields, wherever they nest).
 */
export function durationsAsText(schema: z.ZodType, value: unknown): unknown {
  let json = jsonOf.get(schema);
  if (!json) {
    json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonNode;
    jsonOf.set(schema, json);
  }
  return asText(json, value);
}

function asText(node: JsonNode, value: unknown): unknown {
  const alternatives = [node, ...(node.anyOf ?? []), ...(node.oneOf ?? [])];
  if (typeof value === 'number') return alternatives.some((a) => a.pattern === DURATION_PATTERN.source) ? formatDuration(value) : value;
  if (Array.isArray(value)) {
    const items = alternatives.find((a) => a.items)?.items;
    return items ? value.map((v) => asText(items, v)) : value;
  }
  if (value === null || typeof value !== 'object') return value;
  // of a discriminated union, the alternative whose literals (its `type`) the value has
  const fits = (a: JsonNode) =>
    Object.entries(a.properties ?? {}).every(([k, p]) => p.const === undefined || (value as Record<string, unknown>)[k] === p.const);
  const properties = alternatives.find((a) => a.properties && fits(a))?.properties;
  if (!properties) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, properties[k] ? asText(properties[k], v) : v]));
}
