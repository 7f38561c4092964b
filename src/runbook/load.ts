import { didYouMean } from '../document/did-you-mean.js';
import { readDocumentFile } from '../document/read-file.js';
import type { ModuleCatalog } from './catalog.js';
import { applyParams, checkParams } from './params.js';
import { type Checked, type DocPath, invalidFileError, type Problem, sortProblems } from '../document/problems.js';
import { Runbook, type Runbook as RunbookSpec } from './schema.js';
import { formatDuration } from '../core/duration.js';
import { type Expected, parseYamlSource, type YamlSource } from '../document/yaml-source.js';
import { withTodoProblems } from '../document/todo.js';
import { zodProblems } from '../document/zod-problems.js';

export interface LoadedRunbook {
  /** As given. */
  file: string;
  /** Parsed; every `with:` replaced by its module schema's output (for node-targeted actions, `with.nodes` is a NodeSelector). */
  runbook: Runbook;
  /** `FILE:LINE:COL` of a path in the document, for messages. */
  where(path: DocPath): string;
  /** Line and column of a path in the document. */
  locate(path: DocPath): { line: number; col: number };
  /** What is allowed but likely not meant (no spec.safety), for `validate` to print. */
  warnings: Problem[];
}

const RUNBOOK_EXPECTED: Expected = { what: 'a Runbook', keys: ['apiVersion', 'kind', 'metadata', 'spec'], kind: 'Runbook' };

/** Every problem of a runbook at once, or the loaded runbook; each `with:` is checked against its module in `catalog`. */
export async function checkRunbook(content: string | Uint8Array, file: string, catalog: ModuleCatalog): Promise<Checked<LoadedRunbook>> {
  const { source, problems } = parseYamlSource(content, file, RUNBOOK_EXPECTED);
  if (!source) return { ok: false, problems: sortProblems(problems) };
  const parsed = await Runbook.safeParseAsync(source.value);
  if (!parsed.success) problems.push(...zodProblems(Runbook, source.value, parsed.error.issues, [], source));
  const params = await checkParams(source, problems, catalog);
  problems.push(...params.problems, ...meaningProblems(source));
  if (parsed.success) problems.push(...ttlProblems(source, parsed.data));
  const all = withTodoProblems(source, problems);
  if (!parsed.success || all.length > 0) return { ok: false, problems: sortProblems(all) };
  applyParams(parsed.data, params.outputs);
  return {
    ok: true,
    value: {
      file,
      runbook: parsed.data,
      where: source.where,
      locate: (path) => source.locate(path),
      warnings: safetyWarnings(source, parsed.data),
    },
  };
}

/**
 * A runbook without spec.safety runs with its defaults, the first of which refuses every context: said with the
 * values that apply, read from the schema's defaults.
 */
function safetyWarnings(source: YamlSource, runbook: RunbookSpec): Problem[] {
  const raw = (source.value as { spec?: { safety?: unknown } }).spec;
  if (raw && typeof raw === 'object' && 'safety' in raw) return [];
  const s = runbook.spec.safety;
  const limit = (l: number | string, role: string) =>
    typeof l === 'number' ? `${l} ${role} node${l === 1 ? '' : 's'}` : `${l} of the ${role} nodes`;
  return [
    source.problem(
      ['spec'],
      'no spec.safety, so its defaults apply: allowContexts is empty, so every context is refused (run and preflight refuse to start); ' +
        `maxDuration ${formatDuration(s.maxDuration)}, faultTtl ${formatDuration(s.faultTtl)}, remediationTtl ${formatDuration(s.remediationTtl)}, ` +
        `maxUnavailable ${limit(s.maxUnavailable.controlPlane, 'control-plane')} and ${limit(s.maxUnavailable.worker, 'worker')} faulted at once, ` +
        `lockNamespace ${s.lockNamespace}; add spec.safety to choose them`,
      'key',
    ),
  ];
}

type RawSpec = { guards?: unknown; remediation?: unknown; steps?: unknown; objectives?: unknown };

/** Problems the schema cannot see: parts of the runbook that refer to each other. */
function meaningProblems(source: YamlSource): Problem[] {
  const spec = (source.value as { spec?: RawSpec }).spec;
  if (!spec || typeof spec !== 'object') return [];
  return [...remediationProblems(source, spec), ...revertProblems(source, spec), ...objectiveProblems(source, spec)];
}

function remediationProblems(source: YamlSource, spec: RawSpec): Problem[] {
  const problems: Problem[] = [];
  const hasRemediation = Array.isArray(spec.remediation) && spec.remediation.length > 0;
  if (Array.isArray(spec.guards) && !hasRemediation)
    spec.guards.forEach((g: unknown, i) => {
      if (g && typeof g === 'object' && (g as { onViolation?: unknown }).onViolation === 'remediate')
        problems.push(
          source.problem(
            ['spec', 'guards', i, 'onViolation'],
            'onViolation is "remediate" but spec.remediation is empty (got "remediate")',
          ),
        );
    });
  return problems;
}

/**
 * A remediation or protective step (revertLast) must outlast the faults: its node-side dead-man waits
 * remediationTtl, a fault's faultTtl, and a remediation undone before the faults it protects against is the cascade
 * it prevents. Said where the runbook sets the one that is wrong (remediationTtl when given, else faultTtl).
 */
function ttlProblems(source: YamlSource, runbook: RunbookSpec): Problem[] {
  const { faultTtl, remediationTtl } = runbook.spec.safety;
  const protects = runbook.spec.remediation.length > 0 || runbook.spec.steps.some((s) => 'revertLast' in s && s.revertLast === true);
  if (!protects || remediationTtl > faultTtl) return [];
  const raw = (source.value as { spec?: { safety?: Record<string, unknown> } }).spec?.safety ?? {};
  const given = 'remediationTtl' in raw;
  const at = ['spec', 'safety', given ? 'remediationTtl' : 'faultTtl'];
  const message =
    `remediationTtl (${formatDuration(remediationTtl)}${given ? '' : ', the default'}) must be longer than faultTtl (${formatDuration(faultTtl)}): ` +
    `a remediation's dead-man would undo it before the faults' dead-men revert them; set spec.safety.remediationTtl above faultTtl (got ${JSON.stringify(given ? raw.remediationTtl : raw.faultTtl)})`;
  return [source.problem(at, message)];
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

/** Every objective in the runbook with where it is: the run's, then each action step's own (in parallel steps too). */
function allObjectives(spec: RawSpec): { path: DocPath; objective: unknown }[] {
  const out: { path: DocPath; objective: unknown }[] = [];
  const list = (path: DocPath, v: unknown) => {
    if (Array.isArray(v)) v.forEach((objective, i) => out.push({ path: [...path, i], objective }));
  };
  list(['spec', 'objectives'], spec.objectives);
  const field = (o: unknown, key: string): unknown => (o && typeof o === 'object' ? (o as Record<string, unknown>)[key] : undefined);
  const steps = Array.isArray(spec.steps) ? spec.steps : [];
  steps.forEach((s: unknown, i) => {
    list(['spec', 'steps', i, 'objectives'], field(s, 'objectives'));
    const children = field(s, 'parallel');
    if (Array.isArray(children))
      children.forEach((c, j) => list(['spec', 'steps', i, 'parallel', j, 'objectives'], field(c, 'objectives')));
  });
  return out;
}

/** Objectives have names of their own (the run's and the steps' together), and `from: {step: NAME}` names a step that has that name. */
function objectiveProblems(source: YamlSource, spec: RawSpec): Problem[] {
  const problems: Problem[] = [];
  const steps = Array.isArray(spec.steps) ? spec.steps : [];
  const stepNames = steps.flatMap((s: unknown) =>
    s && typeof s === 'object' && typeof (s as { name?: unknown }).name === 'string' ? [(s as { name: string }).name] : [],
  );
  const seen = new Set<string>();
  for (const { path, objective: o } of allObjectives(spec)) {
    if (!o || typeof o !== 'object') continue;
    const { name, from } = o as { name?: unknown; from?: unknown };
    if (typeof name === 'string') {
      if (seen.has(name)) problems.push(source.problem([...path, 'name'], `another objective has this name (got ${JSON.stringify(name)})`));
      seen.add(name);
    }
    const step = from && typeof from === 'object' ? (from as { step?: unknown }).step : undefined;
    if (typeof step === 'string' && !stepNames.includes(step)) {
      const h = didYouMean(step, stepNames);
      const named = stepNames.map((n) => JSON.stringify(n)).join(', ') || 'none';
      problems.push(
        source.problem(
          [...path, 'from', 'step'],
          `no step has this name (named steps: ${named}${h ? `; ${h}` : ''}) (got ${JSON.stringify(step)})`,
        ),
      );
    }
  }
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
