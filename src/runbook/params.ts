import { z } from 'zod';
import { messageOf } from '../core/errors.js';
import { type ModuleCatalog, type ModuleKind, type ParamsMeta, targetsNodes } from './catalog.js';
import { didYouMean } from '../document/did-you-mean.js';
import { type DocPath, type Problem, pathText } from '../document/problems.js';
import { moduleKindOf, Runbook } from './schema.js';
import { NodeSelector } from './selectors.js';
import type { YamlSource } from '../document/yaml-source.js';
import { zodProblems } from '../document/zod-problems.js';

/** A mapping in a runbook that names an action or a probe and gives it `with:` parameters. */
export interface ParamSite {
  path: DocPath;
  kind: ModuleKind;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Every place with a `with:` block (guards, steps, also inside parallel, remediation, `orElse`, rollback.waitFor),
 * found by walking the runbook beside the language's schema: wherever the schema has a mapping that names a module
 * (moduleKindOf), so that a new place in the language is checked without being listed here.
 */
function paramSites(runbook: unknown): ParamSite[] {
  const sites: ParamSite[] = [];
  walk(Runbook, runbook, [], sites);
  return sites;
}

function walk(schema: z.ZodType, value: unknown, path: DocPath, sites: ParamSite[]): void {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault || schema instanceof z.ZodPrefault)
    return walk(schema.unwrap() as z.ZodType, value, path, sites);
  if (schema instanceof z.ZodPipe) return walk(schema.in as z.ZodType, value, path, sites);
  if (schema instanceof z.ZodArray) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(schema.element as z.ZodType, v, [...path, i], sites));
    return;
  }
  if (schema instanceof z.ZodUnion) {
    const chosen = branchFor(schema.options as readonly z.ZodType[], value);
    if (chosen) walk(chosen, value, path, sites);
    return;
  }
  if (!(schema instanceof z.ZodObject) || !isObj(value)) return;
  const shape = schema.shape as Record<string, z.ZodType>;
  const kind = moduleKindOf(Object.keys(shape));
  if (kind) sites.push({ path, kind });
  // a module's own parameters are its schema's to check
  for (const [key, child] of Object.entries(shape)) if (key !== 'with' && key in value) walk(child, value[key], [...path, key], sites);
}

/** The mapping of a union a value is meant as: the one that has the most of its keys (a step names its kind by one). */
function branchFor(options: readonly z.ZodType[], value: unknown): z.ZodType | undefined {
  if (!isObj(value)) return undefined;
  let best: z.ZodType | undefined;
  let most = 0;
  for (const o of options) {
    if (!(o instanceof z.ZodObject)) continue;
    const shape = o.shape as Record<string, unknown>;
    const n = Object.keys(value).filter((k) => k in shape && k !== 'name').length;
    if (n > most) [best, most] = [o, n];
  }
  return best;
}

function valueAt(root: unknown, path: DocPath): unknown {
  let v = root;
  for (const seg of path) v = isObj(v) || Array.isArray(v) ? (v as Record<string | number, unknown>)[seg] : undefined;
  return v;
}

const siteKey = (path: DocPath) => path.join('\u0000');

export interface ParamsChecked {
  problems: Problem[];
  /** The module schema's output for each site, by siteKey. */
  outputs: Map<string, unknown>;
}

/**
 * Checks each `with:` against its module's own schema. For node-targeted actions `nodes` is a NodeSelector
 * (the module's defaultNodes, else `all`, when absent) and the module schema checks the rest; for a cluster action
 * whose params can send it to nodes (`nodesWhen`), `nodes` is required when they do and refused when they do not.
 * Sites whose id already has a problem are left alone.
 */
export async function checkParams(source: YamlSource, known: readonly Problem[], catalog: ModuleCatalog): Promise<ParamsChecked> {
  const problems: Problem[] = [];
  const outputs = new Map<string, unknown>();
  const flagged = new Set(known.map((p) => p.path));
  for (const site of paramSites(source.value)) {
    const obj = valueAt(source.value, site.path) as Obj;
    const id = obj[site.kind];
    const idPath = [...site.path, site.kind];
    if (typeof id !== 'string' || flagged.has(pathText(idPath))) continue;
    const ids = catalog.ids(site.kind);
    if (!ids.includes(id)) {
      const h = didYouMean(id, ids);
      problems.push(source.problem(idPath, `unknown ${site.kind} ${JSON.stringify(id)} (${h ? `${h} ` : ''}known: ${ids.join(', ')})`));
      continue;
    }
    let meta: ParamsMeta;
    try {
      const found = await catalog.meta(site.kind, id);
      if (!found) continue;
      meta = found;
    } catch (e) {
      problems.push(source.problem(idPath, `${site.kind} ${JSON.stringify(id)} could not be loaded: ${messageOf(e)}`));
      continue;
    }
    const given = obj.with;
    if (given !== undefined && !isObj(given)) continue; // the runbook schema reports it
    const withPath = [...site.path, 'with'];
    let params: Obj = given ?? {};
    let nodes: unknown;
    let ok = true;
    const checkSelector = async (sel: unknown) => {
      const s = await NodeSelector.safeParseAsync(sel);
      if (s.success) nodes = s.data;
      else {
        ok = false;
        problems.push(...zodProblems(NodeSelector, sel, s.error.issues, [...withPath, 'nodes'], source));
      }
    };
    const when = site.kind === 'action' ? meta.nodesWhen : undefined;
    const { nodes: selector, ...rest } = params;
    if (site.kind === 'action' && meta.targets === 'nodes') {
      params = rest;
      await checkSelector(selector ?? meta.defaultNodes ?? 'all');
    } else if (when) params = rest;
    const r = await meta.params.safeParseAsync(params);
    if (!r.success) {
      problems.push(...zodProblems(meta.params, params, r.error.issues, withPath, source));
      continue;
    }
    if (when) {
      const value = (r.data as Obj)[when.param];
      if (!targetsNodes(meta, r.data as Obj)) {
        if (selector !== undefined) {
          ok = false;
          problems.push(
            source.problem(
              [...withPath, 'nodes'],
              `nodes applies only with ${when.param}: ${when.equals} (got ${when.param}: ${String(value)})`,
            ),
          );
        }
      } else if (selector === undefined) {
        ok = false;
        problems.push(
          source.problem(withPath, `${when.param}: ${when.equals} needs nodes: the nodes to run it on (all, workers, {names: [...]}, ...)`),
        );
      } else await checkSelector(selector);
    }
    if (ok) outputs.set(siteKey(site.path), nodes === undefined ? r.data : { ...(r.data as Obj), nodes });
  }
  return { problems, outputs };
}

/** Replaces every `with:` of a parsed runbook by its module's parsed output. */
export function applyParams(runbook: unknown, outputs: Map<string, unknown>): void {
  for (const site of paramSites(runbook)) {
    const obj = valueAt(runbook, site.path) as Obj;
    if (outputs.has(siteKey(site.path))) obj.with = outputs.get(siteKey(site.path));
  }
}
