import { describe, expect, it } from 'vitest';
import type { RunReport } from 'kube-runbook/internal/report/collect.js';
import { renderOutcome, type Outcome } from './demo.js';

const report = { status: 'passed', reason: 'all steps passed', faults: [], guardFirings: [] } as unknown as RunReport;
const outcome = (o: Partial<Outcome>): Outcome => ({
  label: 'without guards',
  exitCode: 0,
  report,
  evicted: [],
  evictedSeenByRun: [],
  killed: [],
  killedFrom: 'containerd of rnode-1, rnode-2, rnode-3 (container ids and start times before and after)',
  restarted: 0,
  realContainersAtStart: 6,
  readyAtEnd: '3/3',
  reportDir: '/tmp/r',
  ...o,
});

describe("the demo's outcome", () => {
  it('says how many containers the runtime counted as killed, where, and out of how many', () => {
    const text = renderOutcome(
      outcome({
        killed: [
          { pod: 'demo/a', node: 'rnode-1', at: '2026-11-27T16:59:00.000Z', reason: 'no longer running in containerd' },
          { pod: 'demo/b', node: 'rnode-2', at: '2026-11-27T16:59:00.000Z', reason: 'no longer running in containerd' },
        ],
      }),
    ).split('\n');
    expect(text[2]).toBe('  containers killed:   2: demo/a on rnode-1, demo/b on rnode-2');
    expect(text[3]).toBe(
      '                       counted by containerd of rnode-1, rnode-2, rnode-3 (container ids and start times before and after); 6 running at the start',
    );
  });

  it('names restarts in place', () => {
    const text = renderOutcome(
      outcome({ killed: [{ pod: 'demo/a', node: 'rnode-1', at: '2026-11-27T16:59:00.000Z', reason: 'restarted' }], restarted: 1 }),
    ).split('\n');
    expect(text[2]).toBe('  containers killed:   1 (1 restarted): demo/a on rnode-1');
  });

  it('names the simulator as the source on simulated nodes', () => {
    const text = renderOutcome(
      outcome({ killedFrom: "the kubelet simulator's kill log of node-1, node-2, node-3", realContainersAtStart: 0 }),
    ).split('\n');
    expect(text[2]).toBe('  containers killed:   0');
    expect(text[3]).toBe("                       counted by the kubelet simulator's kill log of node-1, node-2, node-3");
  });
});
