/**
 * Every shipped runbook says when the cluster counts as recovered from what it did: recovery objectives
 * (`spec.objectives`, or a step's), their `within` set from lab measurements with margin and checked met by the lab
 * test that runs the runbook. A runbook that applies nothing has nothing to recover from: it is named here with its
 * reason, and stays an exception only while it applies nothing.
 */
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultRegistry } from '../src/engine/registry.js';
import { loadRunbook } from '../src/runbook/load.js';

const shipped = readdirSync('runbooks', { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

/** The shipped runbooks without objectives, and why: each says so in its own header comment too. */
const WITHOUT_OBJECTIVES: Record<string, string> = {
  'endpoints-watch.yaml': 'read-only: it watches Endpoints and EndpointSlices and changes nothing',
  'heartbeat-audit.yaml': 'read-only: it reads leases, nodes, etcd and the leader Lease and changes nothing',
};

/** The shortest objective a shipped runbook may set: the lab runs on busy CI machines. */
const MIN_WITHIN_MS = 30_000;

describe('shipped runbooks: recovery objectives', () => {
  it('names only shipped runbooks as exceptions', () => {
    expect(shipped.length).toBeGreaterThan(5);
    for (const f of Object.keys(WITHOUT_OBJECTIVES)) expect(shipped).toContain(f);
  });

  for (const file of shipped)
    it(`${file}: ${WITHOUT_OBJECTIVES[file] ? `none, ${WITHOUT_OBJECTIVES[file]}` : `recovery objectives, none under ${MIN_WITHIN_MS / 1000} s`}`, async () => {
      const { runbook } = await loadRunbook(`runbooks/${file}`, defaultRegistry);
      const steps = runbook.spec.steps.flatMap((s) => ('parallel' in s ? s.parallel : [s]));
      const objectives = [...runbook.spec.objectives, ...steps.flatMap((s) => ('objectives' in s ? (s.objectives ?? []) : []))];
      if (WITHOUT_OBJECTIVES[file]) {
        expect(
          steps.filter((s) => 'action' in s).map((s) => s.name),
          `${file} applies something: give it recovery objectives`,
        ).toEqual([]);
        expect(runbook.spec.remediation ?? [], `${file} remediates: give it recovery objectives`).toEqual([]);
        expect(objectives).toEqual([]);
        return;
      }
      expect(
        objectives.map((o) => o.name),
        `${file}: every shipped runbook that changes the cluster has recovery objectives`,
      ).not.toEqual([]);
      for (const o of objectives) expect(o.within, `${file}: objective "${o.name}"`).toBeGreaterThanOrEqual(MIN_WITHIN_MS);
    });
});
