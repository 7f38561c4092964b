import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Option } from 'commander';
import { EXIT, isKrError, messageOf, quote } from '../core/errors.js';
import { redactText } from '../core/redact.js';
import { checkInventory } from '../inventory/load.js';
import { didYouMean } from '../document/did-you-mean.js';
import { defaultRegistry } from '../engine/registry.js';
import { checkRunbook } from '../runbook/load.js';
import { formatProblem, type Problem, sortProblems } from '../document/problems.js';
import { readDocumentFile } from '../document/read-file.js';
import { parseYamlSource } from '../document/yaml-source.js';
import { out } from './output.js';
import { pairProblems } from './pair.js';
import type { LoadedInventory } from '../inventory/load.js';
import type { LoadedRunbook } from '../runbook/load.js';
import type { CommandHelp, Register } from './types.js';

const KINDS = ['Runbook', 'Inventory'] as const;
type Kind = (typeof KINDS)[number];

type Placed = { line: number | null; col: number | null; path: string; message: string };

/** One file's outcome; `--output json` prints these. A file that cannot be read has one problem without a position. */
export interface FileResult {
  file: string;
  ok: boolean;
  kind: Kind | null;
  problems: Placed[];
  /** What is allowed but likely not meant (a runbook without spec.safety): printed, the file is still valid. */
  warnings: Placed[];
  /** `Runbook name, N steps, M guards[, K objectives]` */
  summary?: string;
  /** The checked document, for the checks of a runbook against an inventory. */
  loaded?: { kind: 'Runbook'; value: LoadedRunbook } | { kind: 'Inventory'; value: LoadedInventory };
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Checks one file as a Runbook or an Inventory: by its `kind`, or as `expected` (a file of the other kind gets one line saying so). */
export async function validateFile(file: string, expected?: Kind): Promise<FileResult> {
  let content: Buffer;
  try {
    content = await readDocumentFile(file);
  } catch (e) {
    if (!isKrError(e)) throw e;
    return { file, ok: false, kind: null, problems: [{ line: null, col: null, path: '', message: e.message }], warnings: [] };
  }
  const failed = (kind: Kind | null, problems: Problem[]): FileResult => ({ file, ok: false, kind, problems, warnings: [] });
  const { source, problems } = parseYamlSource(content, file, {
    what: 'a Runbook or an Inventory',
    keys: ['apiVersion', 'kind', 'metadata', 'spec'],
  });
  if (!source) return failed(null, sortProblems(problems));
  const kind = expected ?? (source.value as { kind?: unknown }).kind;
  if (kind === 'Runbook') {
    const c = await checkRunbook(content, file, defaultRegistry);
    if (!c.ok) return failed(kind, c.problems);
    const spec = c.value.runbook.spec;
    const summary = `Runbook ${c.value.runbook.metadata.name}, ${plural(spec.steps.length, 'step')}, ${plural(spec.guards.length, 'guard')}${spec.objectives.length ? `, ${plural(spec.objectives.length, 'objective')}` : ''}`;
    return { file, ok: true, kind, problems: [], warnings: c.value.warnings, summary, loaded: { kind, value: c.value } };
  }
  if (kind === 'Inventory') {
    const c = await checkInventory(content, file);
    if (!c.ok) return failed(kind, c.problems);
    const inv = c.value.inventory;
    return {
      file,
      ok: true,
      kind,
      problems: [],
      warnings: [],
      summary: `Inventory ${inv.metadata.name}, ${plural(inv.spec.nodes.length, 'node')}, layout ${inv.spec.layout}`,
      loaded: { kind, value: c.value },
    };
  }
  if (kind === undefined) {
    const at = source.locate([]);
    return failed(null, [...problems, { ...at, path: '', message: `missing required key "kind" (expected one of ${KINDS.join(', ')})` }]);
  }
  const h = typeof kind === 'string' ? didYouMean(kind, KINDS) : undefined;
  return failed(null, [
    ...problems,
    source.problem(['kind'], `unknown kind (expected one of ${KINDS.join(', ')}${h ? `; ${h}` : ''}) (got ${quote(kind)})`),
  ]);
}

/** The files to check: files as given, directories searched for .yaml/.yml files (hidden ones and node_modules skipped). */
export async function expandPaths(paths: readonly string[]): Promise<{ files: string[]; empty: string[] }> {
  const files: string[] = [];
  const empty: string[] = [];
  for (const p of paths) {
    const isDir = await stat(p).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!isDir) {
      files.push(p);
      continue;
    }
    const found = (await readdir(p, { recursive: true }))
      .filter((f) => /\.ya?ml$/i.test(f) && !f.split(/[\\/]/).some((seg) => seg.startsWith('.') || seg === 'node_modules'))
      .sort()
      .map((f) => join(p, f));
    if (found.length === 0) empty.push(p);
    files.push(...found);
  }
  return { files, empty };
}

/** Each runbook checked against the inventory, its problems added to the file they concern (not valid then). */
async function checkPairs(runbooks: FileResult[], inventory: FileResult): Promise<void> {
  if (inventory.loaded?.kind !== 'Inventory') return;
  const byFile = new Map([...runbooks, inventory].map((r) => [r.file, r]));
  for (const r of runbooks) {
    if (r.loaded?.kind !== 'Runbook') continue;
    for (const found of await pairProblems(r.loaded.value, inventory.loaded.value)) {
      const target = byFile.get(found.file) ?? r;
      target.ok = false;
      target.problems.push(...found.problems.map((p) => (p.line === 0 ? { ...p, line: null, col: null } : p)));
    }
  }
}

/** A runbook and an inventory given as the only two files, in any order: checked against each other. */
function asPair(results: FileResult[]): [FileResult, FileResult] | undefined {
  if (results.length !== 2) return undefined;
  const runbook = results.find((r) => r.kind === 'Runbook');
  const inventory = results.find((r) => r.kind === 'Inventory');
  return runbook && inventory ? [runbook, inventory] : undefined;
}

async function validateOrReport(file: string, expected?: Kind): Promise<FileResult> {
  try {
    return await validateFile(file, expected);
  } catch (e) {
    return {
      file,
      ok: false,
      kind: null,
      problems: [{ line: null, col: null, path: '', message: `unexpected error: ${messageOf(e)}` }],
      warnings: [],
    };
  }
}

const placedLine = (file: string, p: Placed) => (p.line === null ? p.message : formatProblem(file, p as Problem));

export const register: Register = (program, done) => {
  program
    .command('validate')
    .description(
      'check runbooks and inventories without touching a cluster, and a runbook against an inventory (RUNBOOK INVENTORY, or -i): ' +
        'everything plan and preflight would refuse without a cluster; problems are printed as FILE:LINE:COL, exit code 2',
    )
    .argument('<files...>', 'runbook and inventory files, or directories to search for .yaml files')
    .option(
      '-i, --inventory <file>',
      'check each runbook against this inventory: blast radius, allowContexts, node names and roles, layouts, agents',
    )
    .addOption(
      new Option('-o, --output <format>', 'text, or json: [{file, ok, kind, problems: [{line, col, path, message}], warnings}]')
        .choices(['text', 'json'])
        .default('text'),
    )
    .action(async (paths: string[], opts: { inventory?: string; output: 'text' | 'json' }) => {
      const { files, empty } = await expandPaths(paths);
      const results: FileResult[] = empty.map((dir) => ({
        file: dir,
        ok: false,
        kind: null,
        problems: [{ line: null, col: null, path: '', message: `no .yaml or .yml files in ${dir}` }],
        warnings: [],
      }));
      const expected = opts.inventory === undefined ? undefined : 'Runbook';
      for (const file of files) results.push(await validateOrReport(file, expected));
      if (opts.inventory !== undefined) {
        const inventory = await validateOrReport(opts.inventory, 'Inventory');
        await checkPairs(results, inventory);
        results.push(inventory);
      } else {
        // two files named as such (not found in directories): a runbook and an inventory are checked together
        const named = paths.length === 2 && files.length === 2 && files.every((f, i) => f === paths[i]);
        const pair = named ? asPair(results) : undefined;
        if (pair) await checkPairs([pair[0]], pair[1]);
      }
      const bad = results.filter((r) => !r.ok);
      if (opts.output === 'json')
        out.stdout(
          redactText(
            JSON.stringify(
              results.map(({ summary: _s, loaded: _l, ...r }) => r),
              null,
              2,
            ),
          ),
        );
      else {
        for (const r of results) {
          if (r.ok) out.stdout(`ok ${r.file} (${r.summary})`);
          for (const p of r.problems) out.stderr(redactText(placedLine(r.file, p)));
          for (const w of r.warnings)
            out.stderr(redactText(`${r.file}:${w.line}:${w.col}: warning: ${w.path ? `${w.path}: ` : ''}${w.message}`));
        }
        if (bad.length > 0) out.stderr(`${bad.length} of ${plural(results.length, 'file')} invalid`);
      }
      done(bad.length > 0 ? EXIT.invalid : EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Author',
  examples: [
    [
      'validate runbook.yaml inventory.yaml',
      'check a runbook against an inventory: what plan and preflight would refuse, as FILE:LINE:COL',
    ],
    ['validate runbooks/ -o json', 'every .yaml file under runbooks/, as JSON'],
  ],
};
