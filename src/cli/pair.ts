import { isKrError } from '../core/errors.js';
import { formatProblem, type Problem } from '../document/problems.js';
import { draftPlan } from '../engine/plan.js';
import { defaultRegistry } from '../engine/registry.js';
import { positioned, type Stage, staticProblems } from '../engine/static-checks.js';
import type { LoadedInventory } from '../inventory/load.js';
import type { LoadedRunbook } from '../runbook/load.js';

/** The problems of one file, at FILE:LINE:COL; a problem without a place has line 0. */
export interface FileProblems {
  file: string;
  problems: Problem[];
}

/**
 * The static checks (src/engine/static-checks.ts; of `stage`, else both) of a runbook against an inventory, with the
 * inventory's context as the one the run would use: what `plan` and preflight would refuse without asking a cluster.
 * `validate RUNBOOK INVENTORY` and `plan --offline` print these the same way.
 */
export async function pairProblems(loaded: LoadedRunbook, inv: LoadedInventory, stage?: Stage): Promise<FileProblems[]> {
  let plan;
  try {
    plan = await draftPlan({
      runbook: loaded.runbook,
      file: loaded.file,
      inventory: inv.inventory,
      registry: defaultRegistry,
      labelsUnknown: 'unresolved',
    });
  } catch (e) {
    // what the plan cannot be drafted for (an unnamed step's revert): said without a place
    if (!isKrError(e) || stage === 'preflight') throw e;
    return [{ file: loaded.file, problems: [{ line: 0, col: 0, path: '', message: e.message }] }];
  }
  return positioned(staticProblems(plan, { context: inv.inventory.spec.context }, stage), { runbook: loaded, inventory: inv });
}

/** `FILE:LINE:COL: PATH: message`, or `FILE: message` for a problem without a place. */
export const problemLine = (file: string, p: Problem): string => (p.line === 0 ? `${file}: ${p.message}` : formatProblem(file, p));
