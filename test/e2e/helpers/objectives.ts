import { expect } from 'vitest';
import type { ObjectiveRecord } from '../../../src/report/collect.js';

/**
 * A shipped runbook's recovery objectives, as its run reported them: every one it declares met within its
 * objective. Prints each time to recover (the figures its `within`s are set from) with `label`.
 */
export function expectObjectivesMet(report: { objectives?: readonly ObjectiveRecord[] }, label: string, names: readonly string[]): void {
  const objectives = report.objectives ?? [];
  console.log(
    `${label}: ${objectives.map((x) => `${x.name} ${x.status} after ${x.recoveryMs ?? '-'} ms (within ${x.withinMs} ms)`).join('; ')}`,
  );
  expect(objectives.map((x) => `${x.name}: ${x.status}`).sort(), `${label}: ${objectives.map((x) => x.detail).join('; ')}`).toEqual(
    names.map((n) => `${n}: met`).sort(),
  );
  for (const x of objectives) expect(x.recoveryMs, x.name).toBeLessThan(x.withinMs);
}
