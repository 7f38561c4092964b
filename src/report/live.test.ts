import { describe, expect, it } from 'vitest';
import { faultLine } from './live.js';

const fault = { faultId: 'f1', action: 'block-kubelet-egress', node: 'node-1', step: 'partition', remediation: false };

describe("the live view's fault lines", () => {
  it('names the fault, its node, the attempts of a revert and the error of a failure', () => {
    expect(faultLine({ type: 'fault-applied', at: 0, fault })).toBe('applied block-kubelet-egress on node-1');
    expect(faultLine({ type: 'fault-reverted', at: 0, fault: { ...fault, node: undefined }, attempts: 1, retried: [] })).toBe(
      'reverted block-kubelet-egress',
    );
    expect(faultLine({ type: 'fault-apply-failed', at: 0, fault, error: 'exit 1' })).toBe(
      'FAILED apply block-kubelet-egress on node-1: exit 1',
    );
    expect(faultLine({ type: 'fault-revert-failed', at: 0, fault, error: 'timed out', attempts: 3, retried: [] })).toBe(
      'FAILED revert block-kubelet-egress on node-1 on attempt 3: timed out',
    );
  });
});
