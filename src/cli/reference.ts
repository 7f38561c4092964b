import { stringify } from 'yaml';
import { z } from 'zod';
import { type ActionMeta, layoutText } from '../contract/action.js';
import type { ApiAccess } from '../contract/access.js';
import { NODE_FACT_KINDS } from '../contract/node-facts.js';
import type { ProbeMeta } from '../contract/probe.js';

/**
 * The reference of an action or a probe, from its `meta`: the one source of docs/actions.md, docs/probes.md and
 * `kube-runbook describe`. Rows first (what `describe --output json` prints), markdown from the rows.
 */
interface JsonSchemaProp {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchemaProp[];
  oneOf?: JsonSchemaProp[];
  items?: JsonSchemaProp;
  pattern?: string;
  format?: string;
  const?: unknown;
  minimum?: number;
  examples?: unknown[];
  properties?: Record<string, JsonSchemaProp>;
  required?: string[];
}

/** One `with:` parameter. `default` is absent when it has none. */
export interface ParamRow {
  name: string;
  type: string;
  required: boolean;
  default?: unknown;
  description: string;
}

function typeOf(p: JsonSchemaProp): string {
  if (p.const !== undefined) return JSON.stringify(p.const);
  if (p.enum) return p.enum.map((v) => JSON.stringify(v)).join(' | ');
  const alts = p.anyOf ?? p.oneOf;
  if (alts) return alts.map(typeOf).join(' | ');
  if (p.type === 'array') return `${p.items ? typeOf(p.items) : 'any'}[]`;
  if (Array.isArray(p.type)) return p.type.join(' | ');
  if (p.pattern?.includes('(?:ms|s|m|h)')) return 'duration';
  return p.type ?? 'object';
}

const inputSchema = (schema: z.ZodType) =>
  z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, JsonSchemaProp>; required?: string[] };

/** A module's `with:` parameters, from its zod schema (as a runbook writes them: durations as text). */
export function paramRows(schema: z.ZodType): ParamRow[] {
  const json = inputSchema(schema);
  return Object.entries(json.properties ?? {}).map(([name, p]) => ({
    name,
    type: typeOf(p),
    required: json.required?.includes(name) === true && p.default === undefined,
    ...(p.default !== undefined ? { default: p.default } : {}),
    description: p.description ?? '',
  }));
}

/** A value a runbook could give P: the schema's own example, else its default, else one made from its type. */
function exampleOf(p: JsonSchemaProp): unknown {
  if (p.examples?.length) return p.examples[0];
  if (p.default !== undefined) return p.default;
  if (p.const !== undefined) return p.const;
  if (p.enum?.length) return p.enum[0];
  const alts = p.anyOf ?? p.oneOf;
  if (alts?.length) return exampleOf(alts[0]!);
  const type = Array.isArray(p.type) ? p.type[0] : p.type;
  if (type === 'array') return [p.items ? exampleOf(p.items) : 'example'];
  if (type === 'integer' || type === 'number') return Math.max(p.minimum ?? 1, 1);
  if (type === 'boolean') return true;
  if (type === 'object')
    return Object.fromEntries(Object.entries(p.properties ?? {}).flatMap(([k, v]) => (p.required?.includes(k) ? [[k, exampleOf(v)]] : [])));
  if (p.pattern?.includes('(?:ms|s|m|h)')) return '30s';
  if (p.format === 'uri' || p.pattern?.startsWith('^https?:')) return 'https://example.com/';
  return 'example';
}

/** One parameter of an example `with:` block: given (required, or what makes the block valid), or left as a comment. */
export interface ExampleParam {
  name: string;
  value: unknown;
  given: boolean;
}

/**
 * The example `with:` of a module: its required parameters with an example value each, the optional ones as comments
 * with their default (or an example). When the required ones alone do not make a valid block (one of two optional
 * parameters is needed), the first optional one that does is given too.
 */
function exampleParams(schema: z.ZodType, nodes: ParamRow[] = []): ExampleParam[] {
  const json = inputSchema(schema);
  const props = Object.entries(json.properties ?? {});
  const params: ExampleParam[] = [
    ...nodes.map((r) => ({ name: r.name, value: r.default ?? 'all', given: false })),
    ...props.map(([name, p]) => ({ name, value: exampleOf(p), given: json.required?.includes(name) === true && p.default === undefined })),
  ];
  const block = (extra?: ExampleParam) =>
    Object.fromEntries(
      params.filter((x) => x.given || x === extra).flatMap((x) => (x.name === 'nodes' && nodes.length ? [] : [[x.name, x.value]])),
    );
  if (!schema.safeParse(block()).success) {
    const needed = params.find((x) => !x.given && x.name !== 'nodes' && schema.safeParse(block(x)).success);
    if (needed) needed.given = true;
  }
  return params;
}

/** The example `with:` block as YAML: parameters left out are commented, so that removing a `# ` gives one. */
export function exampleYaml(params: ExampleParam[]): string {
  if (!params.length) return '';
  const lines = params.flatMap((x) =>
    stringify({ [x.name]: x.value }, { lineWidth: 0 })
      .trimEnd()
      .split('\n')
      .map((l) => `  ${x.given ? '' : '# '}${l}`),
  );
  const header = params.some((x) => x.given) ? 'with:' : '# with:';
  return [header, ...lines].join('\n');
}

/** The `nodes` parameter every action on nodes takes (the engine resolves it, not the action's schema). */
export function nodesRow(m: ActionMeta): ParamRow[] {
  const which = 'which nodes: all, workers, control-plane, or {role, names, zone, selector, count, percent}';
  if (m.nodesWhen)
    return [
      {
        name: 'nodes',
        type: 'node selector',
        required: false,
        description: `${which}; only with \`${m.nodesWhen.param}: ${m.nodesWhen.equals}\`, and then required`,
      },
    ];
  if (m.targets !== 'nodes') return [];
  return [{ name: 'nodes', type: 'node selector', required: false, default: m.defaultNodes ?? 'all', description: which }];
}

export const tableCell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function paramsTable(rows: ParamRow[]): string {
  if (!rows.length) return '_No parameters._\n';
  const line = (r: ParamRow) =>
    `| \`${r.name}\` | ${tableCell(r.type)} | ${r.required ? 'yes' : r.default !== undefined ? `default \`${tableCell(JSON.stringify(r.default))}\`` : 'no'} | ${tableCell(r.description)} |`;
  return `| param | type | required | description |\n|---|---|---|---|\n${rows.map(line).join('\n')}\n`;
}

/** The Kubernetes API permissions a module declares (meta.access), as `kube-runbook manifests` grants them. */
function accessTable(access: readonly ApiAccess[]): string {
  if (!access.length) return '\n### Kubernetes API permissions\n\n_None: it works on nodes only._';
  const rows = access.map((a) => {
    if ('nonResourceURL' in a)
      return `| \`${a.verbs.join(', ')}\` | \`${a.nonResourceURL}\` (non-resource URL) | cluster | ${tableCell(a.why)} |`;
    const where = a.where
      ? a.where
      : a.namespace === undefined
        ? 'cluster-wide'
        : typeof a.namespace === 'string'
          ? `namespace \`${a.namespace}\``
          : `the namespace of \`${a.namespace.param}\``;
    const when = a.onlyIf ? ` (when \`${a.onlyIf.param}\` is \`${a.onlyIf.equals}\`)` : '';
    return `| \`${a.verbs.join(', ')}\` | \`${a.apiGroup ? `${a.resource}.${a.apiGroup}` : a.resource}\` | ${where} | ${tableCell(a.why)}${when} |`;
  });
  return `\n### Kubernetes API permissions\n\nChecked by preflight and granted by \`kube-runbook manifests\`.\n\n| verbs | resource | where | why |\n|---|---|---|---|\n${rows.join('\n')}`;
}

const exampleSection = (params: ExampleParam[]) => (params.length ? `\n### Example\n\n\`\`\`yaml\n${exampleYaml(params)}\n\`\`\`\n` : '');

/** An action's example `with:` block. */
export const actionExample = (m: ActionMeta): ExampleParam[] => exampleParams(m.params, nodesRow(m));

/** A probe's example `with:` block. */
export const probeExample = (m: ProbeMeta): ExampleParam[] => exampleParams(m.params);

/** An action's section of docs/actions.md (also what `describe ACTION` prints). */
export function actionSection(m: ActionMeta): string {
  const layouts = Object.entries(m.layouts ?? {})
    .map(([k, v]) => `- **${k}**: ${layoutText(v)}`)
    .join('\n');
  return `## ${m.id}\n\n${m.summary}\n\n${m.description}\n\n**Kind:** ${m.kind}. **Targets:** ${m.targets}${m.nodesWhen ? ` (nodes with \`${m.nodesWhen.param}: ${m.nodesWhen.equals}\`)` : ''}.\n\n### Parameters (\`with:\`)\n\n${paramsTable([...nodesRow(m), ...paramRows(m.params)])}${exampleSection(actionExample(m))}${layouts ? `\n### By layout\n\n${layouts}\n` : ''}\n### How it is undone\n\n${m.undo}\n${accessTable(m.access)}`;
}

/** The node facts a probe declares (meta.nodeFacts): what the run report draws of its readings per node. */
function nodeFactsList(m: ProbeMeta): string {
  if (!m.nodeFacts) return '';
  return `\n\n### Node facts\n\nWhat its readings tell of single nodes, as the run report draws them (\`meta.nodeFacts\`):\n\n${m.nodeFacts.kinds.map((k) => `- ${NODE_FACT_KINDS[k]}`).join('\n')}`;
}

/** The numbers a probe declares (meta.numbers): what the run report charts of its readings. */
function numbersLine(m: ProbeMeta): string {
  if (!m.numbers) return '';
  return `\n\n### Values charted\n\nWhat the run report draws as curves of its readings (\`meta.numbers\`): ${m.numbers.what}.`;
}

/** A probe's section of docs/probes.md (also what `describe PROBE` prints). */
export function probeSection(m: ProbeMeta): string {
  return `## ${m.id}\n\n${m.summary}\n\n${m.description}\n\n### Parameters (\`with:\`)\n\n${paramsTable(paramRows(m.params))}${exampleSection(probeExample(m))}${accessTable(m.access)}${nodeFactsList(m)}${numbersLine(m)}`;
}
