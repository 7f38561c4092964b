import { describe, expect, it } from 'vitest';
import { type ControllerTrace, judgeTrace, twoZoneDepartures } from './controller-trace.js';

const T = Date.UTC(2026, 11, 2, 8, 0, 0);

/** One zone of three nodes, node-1's kubelet stopped: NotReady, tainted, its pod evicted after 6 s, as 1.37 does. */
const trace = (o: { evictedAt?: number; taintSeenAt?: number } = {}): ControllerTrace => ({
  kind: 'kube-runbook/controller-trace',
  release: 'v1.37.2',
  scenario: 'one-node',
  settings: {
    nodeMonitorGracePeriodMs: 8_000,
    nodeMonitorPeriodMs: 1_000,
    nodeStartupGracePeriodMs: 20_000,
    nodeEvictionRate: 0.5,
    secondaryNodeEvictionRate: 0.2,
    unhealthyZoneThreshold: 0.25,
    largeClusterSizeThreshold: 10,
    leaseDurationMs: 8_000,
  },
  start: T,
  end: T + 40_000,
  nodes: [
    { name: 'node-1', zone: 'zone-a', lastRenew: T + 1_000, stoppedAt: T + 1_500 },
    { name: 'node-2', zone: 'zone-a' },
    { name: 'node-3', zone: 'zone-a' },
  ],
  pods: [
    { key: 'default/web-1', node: 'node-1', tolerationMs: 6_000 },
    { key: 'default/web-2', node: 'node-2', tolerationMs: 6_000 },
  ],
  observed: {
    notReady: [{ node: 'node-1', transition: T + 9_000, seenAt: T + 9_700 }],
    queued: [{ node: 'node-1', at: T + 9_650 }],
    taints: [{ node: 'node-1', timeAdded: T + 9_000, seenAt: o.taintSeenAt ?? T + 9_750 }],
    untainted: [],
    evictions: [{ pod: 'default/web-1', at: o.evictedAt ?? T + 15_760, seenAt: T + 15_800 }],
    zoneStates: [],
  },
});

describe('a recorded trace replayed', () => {
  it('through the stand-in and the forecast: the same node and pod, nothing late', () => {
    const j = judgeTrace(trace());
    expect([j.tainted, j.evicted, j.retaints]).toEqual([['node-1'], ['default/web-1'], 0]);
    for (const s of j.sim) expect([s.tainted, s.evicted]).toEqual([['node-1'], ['default/web-1']]);
    expect(j.late).toEqual([]);
    expect(j.unforeseen).toEqual([]);
    expect(j.readings).toBe(80);
  });

  it('says where the record came before the forecast: a controller quicker than the model', () => {
    // evicted 2 s after the taint, though the pod tolerates it 6 s; tainted a second before the grace period ran out
    const j = judgeTrace(trace({ evictedAt: T + 11_760, taintSeenAt: T + 8_200 }));
    expect(j.late.some((l) => l.includes('eviction of default/web-1'))).toBe(true);
    expect(j.late.some((l) => l.includes('taint of node-1'))).toBe(true);
  });

  it("tells the re-taints the controller's log explains (a failed write, a requeue after the taint) from others", () => {
    const t = trace();
    // node-1 (first tainted with timeAdded T + 9 s) written again three times with a new timeAdded: after nothing in
    // the log, after its taint write failed, after a monitor pass queued it again once the first taint was written
    t.observed.taints.push(
      { node: 'node-1', timeAdded: T + 12_000, seenAt: T + 12_100 },
      { node: 'node-1', timeAdded: T + 14_000, seenAt: T + 14_100 },
    );
    t.observed.taintFailures = [
      { node: 'node-1', at: T + 13_000 },
      { node: 'node-2', at: T + 11_000 },
    ];
    expect([judgeTrace(t, 1).retaints, judgeTrace(t, 1).retaintsExplained]).toEqual([2, 1]);
    delete t.observed.taintFailures;
    expect(judgeTrace(t, 1).retaintsExplained).toBe(0);
    // queued before the first taint (T + 9.65 s, in the trace) explains nothing; queued again at T + 11 s does
    t.observed.queued.push({ node: 'node-1', at: T + 11_000 });
    expect(judgeTrace(t, 1).retaintsExplained).toBe(2);
  });

  it('names what the stand-in did beyond the record, and where it fell short without a backlog to explain it', () => {
    const t = trace();
    expect(twoZoneDepartures(t, judgeTrace(t))).toEqual([]);
    // a record with no eviction (the pod tolerates the taint 6 s): every run of the stand-in evicted it
    const noEviction = trace();
    noEviction.observed.evictions = [];
    const more = twoZoneDepartures(noEviction, judgeTrace(noEviction, 4));
    expect(more).toContain('seed 1: eviction of default/web-1, which the controller did not');
    expect(more).toContain('0 of 4 runs of the stand-in did all the controller did; 3 must');
    // a record where node-2, whose kubelet renewed throughout, was tainted: no run did that, and zone-a had no backlog
    const extra = trace();
    extra.observed.taints.push({ node: 'node-2', timeAdded: T + 20_000, seenAt: T + 20_100 });
    expect(twoZoneDepartures(extra, judgeTrace(extra, 2))).toContain('seed 2: no taint of node-2 in zone-a, which has no backlog');
    // the same in a zone the controller's log shows partially disrupted: on 1.20 a run short there is slower, not wrong
    extra.release = 'v1.20.15';
    extra.observed.zoneStates = [{ zone: 'zone-a', state: 'PartialDisruption', at: T + 9_000 }];
    expect(twoZoneDepartures(extra, judgeTrace(extra, 2))).toEqual(['0 of 2 runs of the stand-in did all the controller did; 1 must']);
  });
});
