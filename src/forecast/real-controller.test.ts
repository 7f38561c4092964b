import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type ControllerTrace, judgeTrace } from '../testing/controller-trace.js';

/*
 * The controller stand-in (src/testing/controller-sim.ts) and the eviction forecast against traces of the real
 * kube-controller-manager, recorded on the lab (test/e2e/forecast-scale.test.ts, test/e2e/probes-forecast.test.ts with
 * KUBE_RUNBOOK_RECORD_TRACES=1): replayed from the recorded input, the stand-in taints and evicts the same nodes and
 * pods, and no forecast made from the recorded cluster is later than the recorded taint or eviction.
 */

const DIR = new URL('./fixtures/', import.meta.url);
const traces = readdirSync(DIR)
  .filter((f) => /^real-controller-.*\.json$/.test(f))
  .sort()
  .map((f) => ({ file: f, trace: JSON.parse(readFileSync(new URL(f, DIR), 'utf8')) as ControllerTrace }));

describe('the model against recorded traces of the real controller', () => {
  it('has a trace of each release and scenario', () => {
    expect(traces.map((t) => t.file)).toEqual(
      ['1.20', '1.34', '1.37'].flatMap((r) => ['all-zones', 'two-zones'].map((s) => `real-controller-${r}-${s}.json`)),
    );
  });

  for (const { file, trace } of traces)
    it(`${file}: the stand-in taints and evicts what the controller did, the forecast is never later`, () => {
      const j = judgeTrace(trace);
      expect(j.tainted.length + j.evicted.length, 'a trace where something happened').toBeGreaterThan(0);
      for (const s of j.sim)
        expect({ seed: s.seed, tainted: s.tainted, evicted: s.evicted }).toEqual({ seed: s.seed, tainted: j.tainted, evicted: j.evicted });
      expect(j.late).toEqual([]);
      expect(j.unforeseen).toEqual([]);
      // 1.20 re-taints from its leftover queue entries, in the record and in the stand-in; later releases do not
      const leftovers = trace.release.startsWith('v1.20');
      if (trace.scenario === 'two-zones') {
        expect(j.retaints > 0, 're-taints in the record').toBe(leftovers);
        for (const s of j.sim) expect(s.retaints > 0, `re-taints by the stand-in, seed ${s.seed}`).toBe(leftovers);
      }
    });
});
