import type { Meter } from '@opentelemetry/api';
import type { RedactedEvent } from '../engine/sinks.js';

/** Recovery times are seconds to minutes: the histogram's buckets, in seconds. */
const RECOVERY_BUCKETS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800];

/**
 * The run's metrics, from its events: faults applied, reverted and failed (counters by action), each guard's
 * readings by status and its firings by response (counters), and each objective's recovery time (a histogram by
 * objective and result, met or missed; a missed one records how long it was watched).
 */
export class RunMetrics {
  private readonly applied;
  private readonly reverted;
  private readonly failed;
  private readonly readings;
  private readonly firings;
  private readonly recovery;
  private runId = '';

  constructor(meter: Meter) {
    this.applied = meter.createCounter('kube_runbook.faults.applied', { description: 'Faults and remediations applied' });
    this.reverted = meter.createCounter('kube_runbook.faults.reverted', { description: 'Faults and remediations reverted' });
    this.failed = meter.createCounter('kube_runbook.faults.failed', { description: 'Applies and reverts that failed' });
    this.readings = meter.createCounter('kube_runbook.guard.readings', { description: "Guards' readings by status" });
    this.firings = meter.createCounter('kube_runbook.guard.firings', { description: 'Guards that fired, by response' });
    this.recovery = meter.createHistogram('kube_runbook.objective.recovery', {
      description: "Recovery objectives' times: to met, or watched until missed",
      unit: 's',
      advice: { explicitBucketBoundaries: RECOVERY_BUCKETS_S },
    });
  }

  readonly onEvent = (e: RedactedEvent): void => {
    const run = { 'kube_runbook.run.id': this.runId };
    switch (e.type) {
      case 'run-start':
        this.runId = e.runId;
        return;
      case 'fault-applied':
        this.applied.add(1, { ...run, 'kube_runbook.action': e.fault.action, 'kube_runbook.remediation': e.fault.remediation });
        return;
      case 'fault-reverted':
        this.reverted.add(1, { ...run, 'kube_runbook.action': e.fault.action, 'kube_runbook.remediation': e.fault.remediation });
        return;
      case 'fault-apply-failed':
      case 'fault-revert-failed':
        this.failed.add(1, {
          ...run,
          'kube_runbook.action': e.fault.action,
          'kube_runbook.op': e.type === 'fault-apply-failed' ? 'apply' : 'revert',
        });
        return;
      case 'guard-reading':
        this.readings.add(1, { ...run, 'kube_runbook.guard': e.guard, 'kube_runbook.reading.status': e.reading.status });
        return;
      case 'guard-fired':
        this.firings.add(1, { ...run, 'kube_runbook.guard': e.guard, 'kube_runbook.guard.response': e.response });
        return;
      case 'objective': {
        if (e.phase !== 'met' && e.phase !== 'missed') return;
        const ms = e.recoveryMs ?? (e.startedAt === undefined ? undefined : e.at - e.startedAt);
        if (ms === undefined) return;
        this.recovery.record(ms / 1000, { ...run, 'kube_runbook.objective': e.name, 'kube_runbook.objective.result': e.phase });
        return;
      }
      default:
        return;
    }
  };
}
