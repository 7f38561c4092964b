import { describe, expect, it } from 'vitest';
import { attemptLine, countKinds, onAttempt } from './attempts.js';

describe('attempt wording', () => {
  it('counts the failures before an attempt that worked', () => {
    expect(onAttempt(3, ['connection reset', 'connection reset'])).toBe('on attempt 3 after 2 connection resets');
    expect(onAttempt(3, ['connection reset', 'connection refusal'])).toBe('on attempt 3 after 1 connection reset and 1 connection refusal');
    expect(onAttempt(1, [])).toBe('');
    expect(onAttempt(undefined, undefined)).toBe('');
    expect(countKinds(['apiserver 503', 'lost connection', 'apiserver 503', 'conflict'])).toBe(
      '2 apiserver 503s, 1 lost connection and 1 conflict',
    );
  });

  it('says what was tried, what failed, and what comes next', () => {
    const fault = { action: 'block-kubelet-egress', node: 'node-1' };
    expect(
      attemptLine({ op: 'revert', fault, attempt: 1, error: 'Connection reset by peer', transient: 'connection reset', retryInMs: 500 }),
    ).toBe('attempt 1 to revert block-kubelet-egress on node-1 failed (connection reset): Connection reset by peer; retrying in 500ms');
    expect(attemptLine({ op: 'revert', fault, attempt: 9, error: 'refused', transient: 'connection refusal' })).toBe(
      'attempt 9 to revert block-kubelet-egress on node-1 failed (connection refusal): refused; no time left to retry',
    );
    expect(attemptLine({ op: 'keepalive', node: 'node-2', attempt: 2, error: 'exit 1' })).toBe(
      'attempt 2 to keep the dead-men alive on node-2 failed (permanent): exit 1',
    );
    expect(
      attemptLine({ op: 'preflight', what: 'cluster', attempt: 1, error: 'HTTP 503', transient: 'apiserver 503', retryInMs: 1000 }),
    ).toBe('attempt 1 to check cluster failed (apiserver 503): HTTP 503; retrying in 1s');
  });
});
