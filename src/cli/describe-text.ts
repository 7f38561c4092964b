import { type ActionMeta, layoutText } from '../contract/action.js';
import type { ApiAccess } from '../contract/access.js';
import { NODE_FACT_KINDS } from '../contract/node-facts.js';
import type { ProbeMeta } from '../contract/probe.js';
import { actionExample, exampleYaml, nodesRow, type ParamRow, paramRows, probeExample } from './reference.js';
import { fold, wrap } from './wrap.js';

/**
 * `describe` on a terminal: the reference of an action or a probe as plain text wrapped to the terminal's width, the
 * same facts as its Markdown (docs/actions.md, docs/probes.md) without the markup.
 */

/** Inline Markdown of a module's texts as plain text: `code` and **bold** lose their marks. */
const plain = (s: string): string => s.replace(/`([^`]*)`/g, '$1').replace(/\*\*([^*]+)\*\*/g, '$1');

/** A type as `describe` writes it: `"a" | "b"` becomes `"a" or "b"`. */
const typeText = (t: string): string => t.replace(/ \| /g, ' or ');

class Sheet {
  readonly lines: string[] = [];
  constructor(readonly width: number) {}

  para(text: string, indent = ''): this {
    this.lines.push(...wrap(plain(text), this.width, indent), '');
    return this;
  }

  heading(title: string): this {
    this.lines.push(title);
    return this;
  }

  /** TERM, then its text from column COL (on the next line when TERM is wider). */
  item(label: string, text: string, col: number): this {
    const term = plain(label);
    const pad = ' '.repeat(col);
    if (term.length + 4 > col) this.lines.push(...wrap(term, this.width, '    ', '  '), ...wrap(plain(text), this.width, pad));
    else this.lines.push(...wrap(plain(text), this.width, pad, `  ${term}`.padEnd(col)));
    return this;
  }

  end(): string {
    return `${this.lines
      .flatMap((l) => fold(l, this.width))
      .join('\n')
      .trimEnd()}\n`;
  }
}

function params(s: Sheet, rows: ParamRow[]): void {
  s.heading('Parameters (with:)');
  if (!rows.length) s.lines.push('  none');
  const col = Math.min(Math.max(...rows.map((r) => r.name.length)) + 6, 24);
  for (const r of rows) {
    const need = r.required ? 'required' : r.default !== undefined ? `default ${JSON.stringify(r.default)}` : 'optional';
    s.item(r.name, `${typeText(r.type)}, ${need}`, col);
    if (r.description) s.lines.push(...wrap(plain(r.description), s.width, ' '.repeat(col)));
  }
  s.lines.push('');
}

function example(s: Sheet, yaml: string): void {
  if (!yaml) return;
  s.heading('Example');
  s.lines.push(...yaml.split('\n').map((l) => `  ${l}`), '');
}

function access(s: Sheet, list: readonly ApiAccess[]): void {
  s.heading('Kubernetes API permissions');
  if (!list.length) s.lines.push('  none: it works on nodes only');
  for (const a of list) {
    if ('nonResourceURL' in a) {
      s.item(`${a.verbs.join(', ')} ${a.nonResourceURL}`, `non-resource URL: ${a.why}`, 6);
      continue;
    }
    const where = a.where
      ? a.where
      : a.namespace === undefined
        ? 'cluster-wide'
        : typeof a.namespace === 'string'
          ? `namespace ${a.namespace}`
          : `the namespace of ${a.namespace.param}`;
    const when = a.onlyIf ? ` (when ${a.onlyIf.param} is ${a.onlyIf.equals})` : '';
    s.item(`${a.verbs.join(', ')} ${a.apiGroup ? `${a.resource}.${a.apiGroup}` : a.resource}`, `${where}: ${a.why}${when}`, 6);
  }
  s.lines.push('');
  if (list.length) s.para('Checked by preflight and granted by kube-runbook manifests.', '  ');
}

export function actionText(m: ActionMeta, width: number): string {
  const s = new Sheet(width);
  const on = m.nodesWhen ? ` (nodes with ${m.nodesWhen.param}: ${m.nodesWhen.equals})` : '';
  s.lines.push(...wrap(`action ${m.id}: ${m.kind}, targets ${m.targets}${on}`, width), '');
  s.para(m.summary).para(m.description);
  params(s, [...nodesRow(m), ...paramRows(m.params)]);
  example(s, exampleYaml(actionExample(m)));
  const layouts = Object.entries(m.layouts ?? {});
  if (layouts.length) {
    s.heading('By layout');
    for (const [k, v] of layouts) s.item(k, layoutText(v), Math.max(...layouts.map(([n]) => n.length)) + 4);
    s.lines.push('');
  }
  s.heading('How it is undone').para(m.undo, '  ');
  access(s, m.access);
  return s.end();
}

export function probeText(m: ProbeMeta, width: number): string {
  const s = new Sheet(width);
  s.lines.push(`probe ${m.id}`, '');
  s.para(m.summary).para(m.description);
  params(s, paramRows(m.params));
  example(s, exampleYaml(probeExample(m)));
  access(s, m.access);
  if (m.nodeFacts) {
    s.heading('Node facts (what its readings tell of single nodes, as the run report draws them)');
    for (const k of m.nodeFacts.kinds) s.para(`- ${NODE_FACT_KINDS[k]}`, '  ');
  }
  if (m.numbers) s.heading('Values charted (what the run report draws as curves of its readings)').para(m.numbers.what);
  return s.end();
}
