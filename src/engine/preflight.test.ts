import { describe, expect, it } from 'vitest';
import { recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { PREFLIGHT_CHECKS } from './preflight-checks.js';

describe('preflight', () => {
  it('runs these checks, in this order (a new one shows here)', () => {
    expect(PREFLIGHT_CHECKS.map((c) => c.name)).toEqual([
      'context',
      'confirmations',
      'cluster',
      'rbac',
      'run lock',
      'halt',
      'static checks',
      'agents',
      'nodes',
      'actions',
    ]);
    for (const c of PREFLIGHT_CHECKS) expect(c.reads, c.name).not.toBe('');
  });

  it('gives the verdicts of a run that passes in that order, and stops at a node that does not answer', async () => {
    const verdicts = async (down?: string) => {
      const h = await startTestRun({
        runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: 'workers' } }] }),
        actions: [{ ...recordingAction('fault-a', []), preflight: async () => {} }],
        probes: [],
      });
      if (down) h.nodes.handler = ({ node }) => ({ code: node === down ? 255 : 0, stdout: 'kube-runbook-ok', stderr: '' });
      await h.handle.result;
      return h.events.flatMap((e) => (e.type === 'preflight' ? [`${e.check} ${e.ok ? 'ok' : 'failed'}`] : []));
    };
    expect(await verdicts()).toEqual(['context ok', 'cluster ok', 'rbac ok', 'run lock ok', 'halt ok', 'nodes ok', 'action 1 fault-a ok']);
    expect(await verdicts('node-2')).toEqual(['context ok', 'cluster ok', 'rbac ok', 'run lock ok', 'halt ok', 'nodes failed']);
  });
});
