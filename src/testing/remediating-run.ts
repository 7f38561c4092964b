import type { Reading } from '../contract/probe.js';
import { baseRunbook, type Harness, startTestRun } from './engine-harness.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from './fake-modules.js';

const okForecast = { status: 'ok', value: null, detail: 'no eviction before 5m' } as const;
const staleLeases = { status: 'violated', value: null, detail: 'node-1 lease 40s old' } as const;

/**
 * Starts a run that partitions node-1 (and then waits `o.wait`, if given) under a guard on the `forecast` probe that
 * remediates by freezing the control plane, and whose rollback waits up to `o.within` for the `leases` probe. Both
 * probes are scripted: the forecast reads ok and the leases stale until a test pushes other readings (`trip`: the
 * forecast's violation that fires the guard).
 */
export async function startRemediatingRun(o: {
  within: string;
  wait?: string;
  forecast?: Omit<Reading, 'at'>;
  leases?: Omit<Reading, 'at'>;
}): Promise<Harness & { log: ActionRecord[]; forecast: ScriptedProbe; leases: ScriptedProbe; trip: () => Promise<void> }> {
  const log: ActionRecord[] = [];
  const forecast = new ScriptedProbe('forecast', o.forecast ?? okForecast);
  const leases = new ScriptedProbe('leases', o.leases ?? staleLeases);
  const h = await startTestRun({
    runbook: baseRunbook({
      guards: [{ probe: 'forecast', onViolation: 'remediate' }],
      steps: [{ action: 'partition', with: { nodes: { names: ['node-1'] } } }, ...(o.wait ? [{ wait: o.wait }] : [])],
      remediation: [{ action: 'freeze', with: { nodes: 'control-plane' } }],
      rollback: { waitFor: { probe: 'leases' }, within: o.within },
    }),
    actions: [recordingAction('partition', log), recordingAction('freeze', log, { kind: 'remediation' })],
    probes: [forecast.probe, leases.probe],
  });
  // ten seconds in, the forecast sees an eviction 20 s away; a second later the guard has fired
  const trip = async () => {
    await h.clock.advance(10_000);
    forecast.push('violated', 'first eviction in 20s');
    await h.clock.advance(1_000);
  };
  return { ...h, log, forecast, leases, trip };
}
