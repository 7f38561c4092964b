import { dirname } from 'node:path';
import { readDocumentFile } from '../document/read-file.js';
import { type Checked, type DocPath, invalidFileError, type Problem, sortProblems } from '../document/problems.js';
import { type Expected, parseYamlSource, type YamlSource } from '../document/yaml-source.js';
import { zodProblems } from '../document/zod-problems.js';
import { withTodoProblems } from '../document/todo.js';
import { Inventory } from './schema.js';

export interface LoadedInventory {
  /** As given. */
  file: string;
  /** The file's directory: relative paths in the inventory (kubeconfig) are relative to it. */
  dir: string;
  /** Parsed; paths stay as written. */
  inventory: Inventory;
  /** `FILE:LINE:COL` of a path in the document, for messages. */
  where(path: DocPath): string;
  /** Line and column of a path in the document. */
  locate(path: DocPath): { line: number; col: number };
}

const INVENTORY_EXPECTED: Expected = { what: 'an Inventory', keys: ['apiVersion', 'kind', 'metadata', 'spec'], kind: 'Inventory' };

/** Every problem of an inventory at once, or the loaded inventory. */
export async function checkInventory(content: string | Uint8Array, file: string): Promise<Checked<LoadedInventory>> {
  const { source, problems } = parseYamlSource(content, file, INVENTORY_EXPECTED);
  if (!source) return { ok: false, problems: sortProblems(problems) };
  const parsed = await Inventory.safeParseAsync(source.value);
  if (!parsed.success) problems.push(...zodProblems(Inventory, source.value, parsed.error.issues, [], source));
  problems.push(...duplicateNodes(source));
  const all = withTodoProblems(source, problems);
  if (!parsed.success || all.length > 0) return { ok: false, problems: sortProblems(all) };
  return {
    ok: true,
    value: { file, dir: dirname(file), inventory: parsed.data, where: source.where, locate: (path) => source.locate(path) },
  };
}

/** Two nodes of one name would make every selector ambiguous. */
function duplicateNodes(source: YamlSource): Problem[] {
  const nodes = (source.value as { spec?: { nodes?: unknown } }).spec?.nodes;
  if (!Array.isArray(nodes)) return [];
  const first = new Map<string, number>();
  const problems: Problem[] = [];
  nodes.forEach((n: unknown, i) => {
    const name = n && typeof n === 'object' ? (n as { name?: unknown }).name : undefined;
    if (typeof name !== 'string') return;
    const j = first.get(name);
    if (j === undefined) first.set(name, i);
    else {
      const at = source.locate(['spec', 'nodes', j, 'name']);
      problems.push(
        source.problem(['spec', 'nodes', i, 'name'], `duplicate node name (first at ${at.line}:${at.col}) (got ${JSON.stringify(name)})`),
      );
    }
  });
  return problems;
}

/** Parses and checks an inventory given as text; KrError INVENTORY_INVALID (exit 2) with every problem otherwise. */
export async function parseInventoryText(text: string, file: string): Promise<LoadedInventory> {
  const checked = await checkInventory(text, file);
  if (!checked.ok) throw invalidFileError('INVENTORY_INVALID', file, checked.problems);
  return checked.value;
}

/** Reads, parses and checks an inventory file; KrError FILE_UNREADABLE when it cannot be read. */
export async function loadInventory(file: string): Promise<LoadedInventory> {
  const checked = await checkInventory(await readDocumentFile(file), file);
  if (!checked.ok) throw invalidFileError('INVENTORY_INVALID', file, checked.problems);
  return checked.value;
}
