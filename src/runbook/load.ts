import { didYouMean } from '../document/did-you-mean.js';
import { readDocumentFile } from '../document/read-file.js';
import type { ModuleCatalog } from './catalog.js';
import { applyParams, checkParams } from './params.js';
import { type Checked, type DocPath, invalidFileError, type Problem, sortProblems } from '../document/problems.js';
import { Runbook } from './schema.js';
import { type Expected, parseYamlSource, type YamlSource } from '../document/yaml-source.js';
import { zodProblems } from '../document/zod-problems.js';

export interface LoadedRunbook {
  /** As given. */
  file: string;
  /** Parsed; every `with:` replaced by its module schema's output (for node-targeted actions, `with.nodes` is a NodeSelector). */
  runbook: Runbook;
  /** `FILE:LINE:COL` of a path in the document, for messages. */
  where(path: DocPath): string;
}

const RUNBOOK_EXPECTED: Expected = { what: 'a Runbook', keys: ['apiVersion', 'kind', 'metadata', 'spec'] };

/** Every problem of a runbook at once, or the loaded runbook; each `with:` is checked against its module in `catalog`. */
export async function checkRunbook(content: string | Uint8Array, file: string, catalog: ModuleCatalog): Promise<Checked<LoadedRunbook>> {
  const { source, problems } = parseYamlSource(content, file, RUNBOOK_EXPECTED);
  if (!source) return { ok: false, problems: sortProblems(problems) };
  const parsed = await Runbook.safeParseAsync(source.value);
  if (!parsed.success) problems.push(...zodProblems(Runbook, source.value, parsed.error.issues, [], source));
  const params = await checkParams(source, problems, catalog);
  problems.push(...params.problems, ...meaningProblems(source));
  if (!parsed.success || problems.length > 0) return { ok: false, problems: sortProblems(problems) };
  applyParams(parsed.data, params.outputs);
  return { ok: true, value: { file, runbook: parsed.data, where: source.where } };
}

type RawSpec = { guards?: unknown; remediation?: unknown; steps?: unknown };

/** Problems the schema cannot see: parts of the runbook that refer to each other. */
function meaningProblems(source: YamlSource): Problem[] {
  const spec = (source.value as { spec?: RawSpec }).spec;
  if (!spec || typeof spec !== 'object') return [];
  return [...remediationProblems(source, spec), ...revertProblems(source, spec)];
}

function remediationProblems(source: YamlSource, spec: RawSpec): Problem[] {
  const problems: Problem[] = [];
  const hasRemediation = Array.isArray(spec.remediation) && spec.remediation.length > 0;
  if (Array.isArray(spec.guards) && !hasRemediation)
    spec.guards.forEach((g: unknown, i) => {
      if (g && typeof g === 'object' && (g as { onViolation?: unknown }).onViolation === 'remediate')
        problems.push(source.problem(['spec', 'guards', i, 'onViolation'], 'onViolation is "remediate" but spec.remediation is empty (got "remediate")'));
    });
  return problems;
}

/** `revert: NAME` names an earlier action step. Unnamed action steps get their names at plan time, so then the plan checks. */
function revertProblems(source: YamlSource, spec: RawSpec): Problem[] {
  const problems: Problem[] = [];
  if (!Array.isArray(spec.steps)) return problems;
  const named: string[] = [];
  let unnamed = false;
  spec.steps.forEach((step: unknown, i) => {
    if (!step || typeof step !== 'object') return;
    const s = step as { action?: unknown; name?: unknown; revert?: unknown };
    if (typeof s.revert === 'string' && !('action' in s) && !unnamed && !named.includes(s.revert)) {
      const earlier = named.map((n) => JSON.stringify(n)).join(', ') || 'none';
      const h = didYouMean(s.revert, named);
      const message = `no earlier action step has this name (earlier action steps: ${earlier}${h ? `; ${h}` : ''}) (got ${JSON.stringify(s.revert)})`;
      problems.push(source.problem(['spec', 'steps', i, 'revert'], message));
    }
    if ('action' in s) {
      if (typeof s.name === 'string') named.push(s.name);
      else unnamed = true;
    }
  });
  return problems;
}

/** Parses and checks a runbook given as text; KrError RUNBOOK_INVALID (exit 2) with every problem otherwise. */
export async function parseRunbookText(text: string, file: string, catalog: ModuleCatalog): Promise<LoadedRunbook> {
  const checked = await checkRunbook(text, file, catalog);
  if (!checked.ok) throw invalidFileError('RUNBOOK_INVALID', file, checked.problems);
  return checked.value;
}

/** Reads, parses and checks a runbook file (see parseRunbookText); KrError FILE_UNREADABLE when it cannot be read. */
export async function loadRunbook(file: string, catalog: ModuleCatalog): Promise<LoadedRunbook> {
  const checked = await checkRunbook(await readDocumentFile(file), file, catalog);
  if (!checked.ok) throw invalidFileError('RUNBOOK_INVALID', file, checked.problems);
  return checked.value;
}
