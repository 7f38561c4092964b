import { describe, expect, it } from 'vitest';
import { krThrown } from '../testing/kr-failure.js';
import { configMapRef } from './configmap-flag.js';

describe('a ConfigMap named by a flag', () => {
  it('is namespace/name', () => {
    expect(configMapRef('--journal-configmap', 'kube-runbook/journal')).toEqual({ namespace: 'kube-runbook', name: 'journal' });
  });

  it('anything else is a usage error (exit 2) naming the flag and the value', () => {
    for (const value of ['journal', 'a/b/c', 'Kube/journal', 'ns/', '/name']) {
      const e = krThrown(() => configMapRef('--report-configmap', value));
      expect(e).toMatchObject({ code: 'BAD_CONFIGMAP', exit: 2 });
      expect(e.message).toBe(`--report-configmap "${value}" is not namespace/name`);
    }
  });
});
