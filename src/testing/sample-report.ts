import type { FaultRef, RunEvent } from '../engine/events.js';
import { ReportCollector, type RunReport } from '../report/collect.js';
import { redactEvent } from '../engine/sinks.js';

const T0 = Date.parse('2026-11-27T10:00:00.000Z');
const at = (s: number) => T0 + s * 1000;
const cut: FaultRef = {
  faultId: 'f01-cut-node-1',
  action: 'block-kubelet-egress',
  node: 'node-1',
  step: '1 cut node-1',
  remediation: false,
};

/** The report of a run of 8 s whose forecast guard aborts it after node-1 is cut off; the fault is reverted. */
export function sampleReport(): RunReport {
  const c = new ReportCollector();
  const events: RunEvent[] = [
    { type: 'run-start', at: at(0), runId: 'r-1', runbook: 'kubelet-partition', context: 'lab', dryRun: false, journal: '/j' },
    { type: 'preflight', at: at(0), check: 'context', ok: true, detail: 'context "lab" is allowed' },
    { type: 'step-start', at: at(1), index: '1', name: 'cut node-1', kind: 'action' },
    { type: 'fault-applied', at: at(2), fault: cut },
    { type: 'step-end', at: at(2), index: '1', name: 'cut node-1', kind: 'action', status: 'passed', detail: 'applied on node-1' },
    {
      type: 'guard-reading',
      at: at(3),
      guard: 'eviction forecast',
      reading: { at: at(3), status: 'ok', detail: 'no eviction predicted', value: null },
      armed: true,
    },
    {
      type: 'guard-reading',
      at: at(5),
      guard: 'eviction forecast',
      reading: {
        at: at(5),
        status: 'violated',
        detail: 'first eviction in 9s',
        value: { earliestEviction: { at: new Date(at(14)).toISOString(), pod: 'demo/web-1', node: 'node-1' } },
      },
      armed: true,
    },
    { type: 'guard-fired', at: at(5), guard: 'eviction forecast', response: 'abort', detail: 'first eviction in 9s' },
    { type: 'rollback-start', at: at(5.2), reason: 'guard eviction forecast violated', faults: [cut] },
    { type: 'fault-reverted', at: at(6), fault: cut, attempts: 1, retried: [] },
    { type: 'rollback-end', at: at(6.5), complete: true, remaining: [] },
    { type: 'run-end', at: at(8), status: 'aborted', reason: 'guard eviction forecast violated', remaining: [] },
  ];
  for (const e of events) c.onEvent(redactEvent(e));
  return c.report;
}
