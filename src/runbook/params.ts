import { messageOf } from '../core/errors.js';
import type { ModuleCatalog, ModuleKind, ParamsMeta } from './catalog.js';
import { didYouMean } from '../document/did-you-mean.js';
import { type DocPath, type Problem, pathText } from '../document/problems.js';
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
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Every place with a `with:` block: guards, steps (also inside parallel), remediation, `orElse`, rollback.waitFor. */
function paramSites(runbook: unknown): ParamSite[] {
  const sites: ParamSite[] = [];
  const spec = isObj(runbook) && isObj(runbook.spec) ? runbook.spec : {};
  const action = (a: unknown, path: DocPath) => {
    if (!isObj(a)) return;
    sites.push({ path, kind: 'action' });
    if (isObj(a.orElse)) sites.push({ path: [...path, 'orElse'], kind: 'action' });
  };
  const step = (s: unknown, path: DocPath) => {
    if (!isObj(s)) return;
    if ('action' in s) action(s, path);
    if (isObj(s.expect)) sites.push({ path: [...path, 'expect'], kind: 'probe' });
    list(s.parallel).forEach((child, j) => step(child, [...path, 'parallel', j]));
  };
  list(spec.guards).forEach((g, i) => isObj(g) && sites.push({ path: ['spec', 'guards', i], kind: 'probe' }));
  list(spec.steps).forEach((s, i) => step(s, ['spec', 'steps', i]));
  list(spec.remediation).forEach((r, i) => action(r, ['spec', 'remediation', i]));
  if (isObj(spec.rollback) && isObj(spec.rollback.waitFor)) sites.push({ path: ['spec', 'rollback', 'waitFor'], kind: 'probe' });
  return sites;
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
 * (the module's defaultNodes, else `all`, when absent) and the module schema checks the rest.
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
    if (site.kind === 'action' && meta.targets === 'nodes') {
      const { nodes: selector, ...rest } = params;
      params = rest;
      const sel = selector ?? meta.defaultNodes ?? 'all';
      const r = await NodeSelector.safeParseAsync(sel);
      if (r.success) nodes = r.data;
      else {
        ok = false;
        problems.push(...zodProblems(NodeSelector, sel, r.error.issues, [...withPath, 'nodes'], source));
      }
    }
    const r = await meta.params.safeParseAsync(params);
    if (!r.success) {
      problems.push(...zodProblems(meta.params, params, r.error.issues, withPath, source));
      continue;
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
